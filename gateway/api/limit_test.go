package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/gatewaytest"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/shared/redistest"
)

// TestRateLimitsPerKey: a key over its budget gets 429 with Retry-After
// and the RateLimit headers; another key's budget is its own.
func TestRateLimitsPerKey(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, gatewaytest.Options{Limits: newLimiter(t), Limit: ratelimit.Limit{Rate: 1, Burst: 3, Period: time.Hour}})
	for i := range 3 {
		resp, b := r.Do(t, r.Acme, "GET", "/api/v1/me", "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Limit") != "3" || resp.Header.Get("RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d: %d %v %s", i, resp.StatusCode, resp.Header, b)
		}
	}
	resp, b := r.Do(t, r.Acme, "GET", "/api/v1/me", "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || decode[problem](t, b).Type != "urn:txfence:problem:rate_limited" {
		t.Errorf("over the budget: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if resp, _ := r.Do(t, r.Globex, "GET", "/api/v1/me", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("another key: %d", resp.StatusCode)
	}
}

// TestWebhookReplaysHaveABudgetOfTheirOwn: each replay queues up to a page
// of deliveries, so a key gets few of them, apart from its request budget:
// once they are spent a replay is 429 with Retry-After while the key's
// other requests go on, and another key's replays are its own.
func TestWebhookReplaysHaveABudgetOfTheirOwn(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, gatewaytest.Options{Limits: newLimiter(t), Limit: ratelimit.Limit{Rate: 1000, Burst: 1000, Period: time.Second},
		ReplayLimit: ratelimit.Limit{Rate: 1, Burst: 2, Period: time.Hour}, Webhooks: &webhook.Options{FeedWait: time.Second}})
	replay := func(key string) (*http.Response, []byte) {
		t.Helper()
		resp, b := r.Do(t, key, "POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/x"}`)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("subscribe: %d %s", resp.StatusCode, b)
		}
		return r.Do(t, key, "POST", "/api/v1/webhooks/"+decode[webhookID](t, b).ID+"/replay", `{"from_seq": 1}`)
	}
	for i := range 2 {
		if resp, b := replay(r.Acme); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("replay %d within the budget: %d %s", i, resp.StatusCode, b)
		}
	}
	resp, b := replay(r.Acme)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || decode[problem](t, b).Type != "urn:txfence:problem:rate_limited" {
		t.Errorf("a replay over the budget: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if resp, _ := r.Do(t, r.Acme, "GET", "/api/v1/me", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("another request of the same key: %d", resp.StatusCode)
	}
	if resp, b := replay(r.Globex); resp.StatusCode != http.StatusAccepted {
		t.Errorf("another key's replay: %d %s", resp.StatusCode, b)
	}
}

type webhookID struct {
	ID string `json:"id"`
}

// newLimiter is a limiter on the test Redis, in a namespace of its own.
func newLimiter(t *testing.T) *ratelimit.Limiter {
	t.Helper()
	opts, err := redis.ParseURL(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	limiter, err := ratelimit.New(rdb, ratelimit.Options{Prefix: "txfence:test:" + t.Name() + ":" + strconv.FormatInt(time.Now().UnixNano(), 10) + ":"})
	if err != nil {
		t.Fatal(err)
	}
	return limiter
}
