package public

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"2", 2 * time.Second, true},
		{" 30 ", 30 * time.Second, true},
		{"600", 10 * time.Minute, true},
		{"86400", maxRetryAfter, true},                // a day: cut to the bound
		{"99999999999999999999", maxRetryAfter, true}, // above uint64
		{date(90 * time.Second), 90 * time.Second, true},
		{now.Add(3 * time.Second).Format(time.RFC850), 3 * time.Second, true}, // the obsolete forms HTTP still allows
		{now.Add(4 * time.Second).Format(time.ANSIC), 4 * time.Second, true},
		{date(48 * time.Hour), maxRetryAfter, true},
		{"", 0, false},
		{"0", 0, false},  // no wait: the back-off decides
		{"-5", 0, false}, // not a delay-seconds
		{"1.5", 0, false},
		{"soon", 0, false},
		{date(-time.Minute), 0, false}, // a date past
		{date(0), 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.header, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

// TestLimiterBackoff: rate limits without a Retry-After keep the endpoint
// out for 1s, then twice as long at each rate limit after it is back, up
// to a minute; a rate limit while it is out is the same episode; an answer
// that is no rate limit starts the back-off over; a Retry-After wins.
func TestLimiterBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	l := &limiter{now: func() time.Time { return now }}
	if !l.allow() || l.wait() > 0 {
		t.Fatal("a new endpoint is out")
	}
	type step struct {
		retryAfter string // a 429's header; "-" for an answer that is no rate limit
		want       time.Duration
		in         bool // sent to before the rate limit
	}
	steps := []step{
		{"", time.Second, true},
		{"", 2 * time.Second, true},
		{"", 4 * time.Second, true},
		{"", 8 * time.Second, true},
		{"", 16 * time.Second, true},
		{"", 32 * time.Second, true},
		{"", time.Minute, true},
		{"", time.Minute, true},
		{"-", 0, true},
		{"", time.Second, true},
		{"7", 7 * time.Second, true},
		{"", time.Second, true}, // after a Retry-After, the back-off starts over
	}
	for i, s := range steps {
		if s.retryAfter == "-" {
			l.answered()
			continue
		}
		if got := l.allow(); got != s.in {
			t.Fatalf("step %d: allow %v, want %v", i, got, s.in)
		}
		l.sawRetryAfter(s.retryAfter)
		wait, wasIn := l.limited()
		if wait != s.want || !wasIn {
			t.Errorf("step %d: out for %v (was in: %v), want %v", i, wait, wasIn, s.want)
		}
		if l.allow() {
			t.Errorf("step %d: allowed while out", i)
		}
		// A late answer to an earlier request, rate limited too: the same
		// episode, no longer wait.
		if again, wasIn := l.limited(); again != wait || wasIn {
			t.Errorf("step %d: a second rate limit while out: %v (was in: %v), want %v", i, again, wasIn, wait)
		}
		now = now.Add(wait)
	}
	// A Retry-After longer than the time left extends it.
	l.sawRetryAfter("")
	l.limited()
	l.sawRetryAfter("30")
	if wait, _ := l.limited(); wait != 30*time.Second {
		t.Errorf("a Retry-After while out: out for %v, want 30s", wait)
	}
}
