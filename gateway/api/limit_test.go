package api_test

import (
	"github.com/txfence/txfence/gateway/gatewaytest"

	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/redistest"
)

// TestRateLimitsPerKey: a key over its budget gets 429 with Retry-After
// and the RateLimit headers; another key's budget is its own.
func TestRateLimitsPerKey(t *testing.T) {
	t.Parallel()
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
	r := gatewaytest.Start(t, gatewaytest.Options{Limits: limiter, Limit: ratelimit.Limit{Rate: 1, Burst: 3, Period: time.Hour}})
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
