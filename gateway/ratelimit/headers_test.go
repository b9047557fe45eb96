package ratelimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/gateway/ratelimit"
)

func TestWriteHeaders(t *testing.T) {
	limit := ratelimit.Limit{Rate: 100, Burst: 200, Period: time.Second}
	tests := []struct {
		name string
		d    ratelimit.Decision
		want http.Header
	}{
		{
			name: "allowed, reset rounded up",
			d:    ratelimit.Decision{Allowed: true, Limit: limit, Remaining: 150, ResetAfter: 500*time.Millisecond + time.Nanosecond, Source: ratelimit.SourceRedis},
			want: http.Header{"Ratelimit-Limit": {"200"}, "Ratelimit-Remaining": {"150"}, "Ratelimit-Reset": {"1"}},
		},
		{
			name: "allowed, whole seconds stay",
			d:    ratelimit.Decision{Allowed: true, Limit: limit, Remaining: 0, ResetAfter: 2 * time.Second, Source: ratelimit.SourceLocal},
			want: http.Header{"Ratelimit-Limit": {"200"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"2"}},
		},
		{
			name: "refused, retry under a second is 1",
			d:    ratelimit.Decision{Limit: limit, RetryAfter: 10 * time.Millisecond, ResetAfter: 1990 * time.Millisecond, Source: ratelimit.SourceRedis},
			want: http.Header{"Ratelimit-Limit": {"200"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"2"}, "Retry-After": {"1"}},
		},
		{
			name: "refused, retry rounded up",
			d:    ratelimit.Decision{Limit: limit, RetryAfter: 61*time.Second + time.Millisecond, ResetAfter: time.Hour, Source: ratelimit.SourceLocal},
			want: http.Header{"Ratelimit-Limit": {"200"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"3600"}, "Retry-After": {"62"}},
		},
		{
			name: "refused with no wait left is still told to wait a second",
			d:    ratelimit.Decision{Limit: limit, Source: ratelimit.SourceRedis},
			want: http.Header{"Ratelimit-Limit": {"200"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"0"}, "Retry-After": {"1"}},
		},
		{
			name: "open decisions counted nothing",
			d:    ratelimit.Decision{Allowed: true, Limit: limit, Source: ratelimit.SourceOpen},
			want: http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.d.WriteHeaders(rec)
			if diff := cmp.Diff(tt.want, rec.Header()); diff != "" {
				t.Errorf("headers mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
