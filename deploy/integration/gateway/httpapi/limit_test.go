package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/gatewaytest"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/testinfra/redistest"
)

// TestRateLimitsPerKey: a key over its budget gets 429 with Retry-After
// and the RateLimit headers; another key's budget is its own.
func TestRateLimitsPerKey(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{Limits: newLimiter(t), Limit: ratelimit.Limit{Rate: 1, Burst: 3, Period: time.Hour}})
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
	r := gatewaystack.Start(t, gatewaystack.Options{Limits: newLimiter(t), Limit: ratelimit.Limit{Rate: 1000, Burst: 1000, Period: time.Second},
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

// TestFailedAuthenticationsAreBounded: an address sending tokens with
// unknown key ids, and anyone guessing the secret of a real key id, are
// answered 429 with Retry-After once their budget of failures is spent,
// without a database lookup; the real key's use is not recorded by any of
// it; a key whose principal is cached, and other addresses, go on.
func TestFailedAuthenticationsAreBounded(t *testing.T) {
	t.Parallel()
	const header = "X-Client-Address"
	r := gatewaystack.Start(t, gatewaystack.Options{Limits: newLimiter(t), Limit: ratelimit.Limit{Rate: 1000, Burst: 1000, Period: time.Second},
		AuthFailureLimit: ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}, ClientAddressHeader: header})
	from := func(addr, key string) int {
		t.Helper()
		resp, _ := r.Do(t, key, "GET", "/api/v1/me", "", header, addr)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
		return resp.StatusCode
	}
	// The victim's key authenticates once: its principal is cached.
	if code := from("198.51.100.1", r.Acme); code != http.StatusOK {
		t.Fatalf("the real key: %d", code)
	}
	// Unknown key ids from one address.
	var codes []int
	for range 8 {
		codes = append(codes, from("203.0.113.7", unknownToken(t)))
	}
	// Five failures fit the burst; the sixth overspends it (and is
	// answered as a failure), and from then on the address is refused.
	if fmt.Sprint(codes) != "[401 401 401 401 401 401 429 429]" {
		t.Errorf("unknown keys from one address: %v, want six 401 then 429", codes)
	}
	// The real key id with a wrong secret, from ever new addresses.
	wrong := gatewaytest.WrongSecret(r.Acme)
	codes = codes[:0]
	for i := range 8 {
		codes = append(codes, from(fmt.Sprintf("192.0.2.%d", i+1), wrong))
	}
	if fmt.Sprint(codes) != "[401 401 401 401 401 401 429 429]" {
		t.Errorf("one key id's wrong secret from many addresses: %v, want six 401 then 429", codes)
	}
	if code := from("198.51.100.1", r.Acme); code != http.StatusOK {
		t.Errorf("the real key, cached, during the attack: %d", code)
	}
	if code := from("198.51.100.2", r.Globex); code != http.StatusOK {
		t.Errorf("another key from another address: %d", code)
	}
	keys, err := r.Store.Keys(context.Background(), r.AcmeTenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.LastUsedAt != nil && time.Since(*k.LastUsedAt) > time.Minute {
			t.Errorf("key %s: last used %v", k.Name, k.LastUsedAt)
		}
	}
}

// unknownToken is a well-formed token of a key that does not exist.
func unknownToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 48)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "txf_" + base64.RawURLEncoding.EncodeToString(b[:16]) + "_" + base64.RawURLEncoding.EncodeToString(b[16:])
}
