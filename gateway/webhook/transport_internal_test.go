package webhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProductionDialsPublicAddressesOnly: without AllowInsecureURLs the
// client refuses the connection itself when the address is not public,
// whatever URL led there; with it, loopback is reached.
func TestProductionDialsPublicAddressesOnly(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	for _, target := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		resp, err := newHTTPClient(false, 1).Post(target, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "not a public address") {
			t.Errorf("production client to %s: %v, want a refusal", target, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the server was reached %d times", hits.Load())
	}
	resp, err := newHTTPClient(true, 1).Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Errorf("the development client did not reach loopback")
	}
}

// TestRetriesBackOffWithFullJitter: attempt n waits below
// min(max, base·2^(n-1)), anywhere in that range, and never past the cap.
func TestRetriesBackOffWithFullJitter(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{opts: Options{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}}
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 40: time.Second, 1000: time.Second} {
		var low, high bool
		for range 2000 {
			w := d.retryIn(n)
			if w < 0 || w >= ceiling {
				t.Fatalf("attempt %d waits %s, want below %s", n, w, ceiling)
			}
			low, high = low || w < ceiling/4, high || w > ceiling*3/4
		}
		if !low || !high {
			t.Errorf("attempt %d: waits do not spread over [0, %s)", n, ceiling)
		}
	}
}
