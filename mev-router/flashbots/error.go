package flashbots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
)

// RelayError is a relay's refusal or a failure to reach it. Relays answer
// errors in two shapes, both kept here: JSON-RPC
// {"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"..."}} (Code
// set), often with status 200, and plain {"error":"..."} with a 4xx or
// 5xx status (Code 0), which Flashbots uses for signature failures (403).
// A request that got no answer has HTTPStatus 0 and Err set.
type RelayError struct {
	URL        string // the relay endpoint called
	Method     string // the JSON-RPC method, or "GET /tx" for the status API
	HTTPStatus int    // 0: no HTTP answer (see Err)
	Code       int    // JSON-RPC error code; 0 for the plain shape
	Message    string // the relay's message, clipped
	Err        error  // the transport error when there was no answer
}

func (e *RelayError) Error() string {
	switch {
	case e.Err != nil:
		return fmt.Sprintf("relay %s: %s: %v", e.URL, e.Method, e.Err)
	case e.Code != 0:
		return fmt.Sprintf("relay %s: %s: HTTP %d, JSON-RPC error %d: %s", e.URL, e.Method, e.HTTPStatus, e.Code, e.Message)
	default:
		return fmt.Sprintf("relay %s: %s: HTTP %d: %s", e.URL, e.Method, e.HTTPStatus, e.Message)
	}
}

// StatusCode is the HTTP status of the relay's answer, 0 without one.
func (e *RelayError) StatusCode() int { return e.HTTPStatus }

// Unwrap returns the transport error, if any.
func (e *RelayError) Unwrap() error { return e.Err }

// Temporary reports whether sending the same request again later may
// succeed: the relay was overloaded or failing (429, 5xx, 408), or the
// request timed out or lost its connection. A refusal of the request
// itself (4xx, JSON-RPC errors under a 2xx status) is not temporary:
// resending it unchanged gets the same answer. Resending is safe for every
// method here (a private transaction or bundle is identified by its hash).
func (e *RelayError) Temporary() bool {
	if e.Err != nil {
		return temporaryTransport(e.Err)
	}
	return e.HTTPStatus >= 500 || e.HTTPStatus == http.StatusTooManyRequests || e.HTTPStatus == http.StatusRequestTimeout
}

func temporaryTransport(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up; not the relay's state
	}
	if errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
