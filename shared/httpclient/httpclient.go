// Package httpclient makes the HTTP clients services call each other with:
// mutual TLS from an mtls.Source, bounded timeouts, and the request's
// trace context (W3C traceparent) and X-Request-Id carried to the next
// hop, so one request can be followed through every service's logs.
package httpclient

import (
	"crypto/tls"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/tracing"
)

// Options tune New.
type Options struct {
	// Timeout bounds a whole request; zero means 30 seconds. Long-polling
	// callers set their own, longer, per request through the context.
	Timeout time.Duration
	// MaxIdleConnsPerHost bounds the kept-alive connections to one
	// service; zero means 64, enough that a busy caller rarely pays a
	// handshake.
	MaxIdleConnsPerHost int
}

// New returns a client using tlsConfig (from mtls.Source.ClientConfig, which
// also pins the server's identity). Requests made with a context that came
// from an incoming request carry its trace context and request id.
func New(tlsConfig *tls.Config, opts Options) *http.Client {
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxIdleConnsPerHost == 0 {
		opts.MaxIdleConnsPerHost = 64
	}
	base := &http.Transport{
		Proxy:                 nil, // service-to-service traffic never goes through a proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   5 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          opts.MaxIdleConnsPerHost * 4,
		MaxIdleConnsPerHost:   opts.MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Timeout:   opts.Timeout,
		Transport: otelhttp.NewTransport(requestIDTransport{base}, otelhttp.WithPropagators(tracing.Propagator)),
	}
}

// requestIDTransport copies the incoming request's id onto outgoing calls.
type requestIDTransport struct{ next http.RoundTripper }

func (t requestIDTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if id := httpserver.RequestID(r.Context()); id != "" && r.Header.Get("X-Request-Id") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Request-Id", id)
	}
	return t.next.RoundTrip(r)
}

// RetryAfter reads a Retry-After header (RFC 9110, section 10.2.3):
// delay-seconds or an HTTP date, as a wait from now. It is 0 when the
// header is absent, unreadable or in the past; callers bound it.
func RetryAfter(header string, now time.Time) time.Duration {
	v := strings.TrimSpace(header)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" { // delay-seconds
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64 // longer than any caller waits
		}
		return time.Duration(s) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
