// Package rpchttp carries JSON-RPC over HTTP through a chain's provider
// pool (package rpcpool): Transport is an http.RoundTripper that sends
// each request to the endpoint the pool picks, fails over to the next one
// when an endpoint cannot answer, and tells the pool how each call went;
// Prober keeps the pool's view of every endpoint's head and chain id
// current. A JSON-RPC client built on Transport (go-ethereum's
// rpc.DialOptions with WithHTTPClient) needs no change to use a pool.
package rpchttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/txfence/txfence/shared/httpclient"
	"github.com/txfence/txfence/shared/rpcpool"
)

// PoolURL is the URL a client built on a Transport dials: the Transport
// replaces it with the chosen endpoint's, so it names no host of its own.
const PoolURL = "http://rpcpool.invalid/"

// Transport sends JSON-RPC requests through a pool.
type Transport struct {
	Pool *rpcpool.Pool
	// Base makes the HTTP exchanges (http.DefaultTransport when nil).
	Base http.RoundTripper
	// Timeout bounds one attempt at one endpoint (default 10s): a node
	// that hangs is given up on, and the call goes to the next.
	Timeout time.Duration
	// MaxBody bounds an answer's size (default 128 MiB: a block's
	// receipts on a busy chain are tens of megabytes).
	MaxBody int64

	urls       map[string]*url.URL
	refreshing singleflight.Group
}

// NewTransport is a Transport over pool, with base making the exchanges.
func NewTransport(pool *rpcpool.Pool, base http.RoundTripper) (*Transport, error) {
	t := &Transport{Pool: pool, Base: base, urls: map[string]*url.URL{}}
	for _, e := range pool.Endpoints() {
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("chain %d: endpoint %s: a pooled endpoint is an http(s) URL", pool.ChainID(), e.Name)
		}
		t.urls[e.Name] = u
	}
	return t, nil
}

// Client is an http.Client over t, for a JSON-RPC client to use.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }

// RoundTrip sends req to the endpoint the pool picks for its calls and
// the head its context asks for (rpcpool.AtHead, rpcpool.On). When the
// endpoint cannot answer (no connection, a timeout, a 5xx, a 429, a
// provider's rate-limit error, or "unknown block" from a node behind the
// head asked for) it goes to the next endpoint; every endpoint is tried
// at most once. The answer returned is the first usable one, or the last
// endpoint's when none was. When no endpoint is known to be at the head
// asked for, the heads are probed once more before giving up: what the
// pool knows may be a probe interval old.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	call := rpcpool.CallOf(req.Context(), methodsOf(body))
	var last *http.Response
	var lastErr error
	refreshed := false
	for {
		e, err := t.Pool.Pick(call)
		if errors.Is(err, rpcpool.ErrBehind) && !refreshed {
			refreshed = true
			t.refreshHeads(req.Context())
			continue
		}
		if err != nil {
			if last != nil || lastErr != nil {
				return last, lastErr
			}
			return nil, err
		}
		call.Tried = append(call.Tried, e.Name)
		resp, result := t.exchange(req, e.Name, body, call.Methods)
		if result.Class != classCancelled {
			t.Pool.Done(e.Name, result)
		}
		if result.Outcome == rpcpool.OK && result.Class != classBehind {
			return resp.response, nil
		}
		last, lastErr = resp.response, resp.err
		if resp.err != nil {
			lastErr = fmt.Errorf("%s: %w", e.Name, resp.err)
		}
		if req.Context().Err() != nil {
			return last, lastErr
		}
	}
}

// answer is one endpoint's answer: a response with its body read, or an
// error.
type answer struct {
	response *http.Response
	err      error
}

// maxRetryAfter bounds how long one 429 keeps an endpoint out: a
// Retry-After of a day (a daily quota) or a broken date is asked again
// after this.
const maxRetryAfter = 10 * time.Minute

const (
	classOK          = "ok"
	classTimeout     = "timeout"
	classConnection  = "connection"
	classHTTP        = "http_error"
	classServer      = "http_5xx"
	classRateLimited = "rate_limited"
	classBehind      = "behind"
	classCancelled   = "cancelled"
)

// exchange sends body to endpoint name and classifies the answer.
func (t *Transport) exchange(req *http.Request, name string, body []byte, methods []string) (answer, rpcpool.Result) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout())
	defer cancel()
	out := req.Clone(ctx)
	u := t.urls[name]
	out.URL, out.Host = u, u.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	start := time.Now()
	resp, err := t.base().RoundTrip(out)
	var raw []byte
	if err == nil {
		raw, err = io.ReadAll(io.LimitReader(resp.Body, t.maxBody()+1))
		resp.Body.Close()
		if err == nil && int64(len(raw)) > t.maxBody() {
			err = fmt.Errorf("an answer larger than %d bytes", t.maxBody())
		}
	}
	result := rpcpool.Result{}
	if len(methods) <= len(probeMethods) {
		// The answer time of one call (or a probe's two) compares
		// endpoints; a batch's grows with what it asks for.
		result.Latency = time.Since(start)
	}
	if err != nil {
		result.Outcome, result.Class = rpcpool.Failed, classConnection
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			result.Class = classTimeout
		}
		if req.Context().Err() != nil {
			// The caller gave up, which says nothing about the endpoint.
			result.Class = classCancelled
		}
		return answer{err: err}, result
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	resp.ContentLength = int64(len(raw))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		result.Outcome, result.Class = rpcpool.RateLimited, classRateLimited
		result.RetryAfter = min(httpclient.RetryAfter(resp.Header.Get("Retry-After"), time.Now()), maxRetryAfter)
	case resp.StatusCode >= 500:
		result.Outcome, result.Class = rpcpool.Failed, classServer
	case resp.StatusCode != http.StatusOK:
		// A 4xx other than 429 is about the request (too large, refused
		// method): an answer the caller should see, not the node failing.
		result.Outcome, result.Class = rpcpool.OK, classHTTP
	default:
		result.Outcome, result.Class = t.read(name, raw, methods)
	}
	return answer{response: resp}, result
}

// read classifies a 200 answer's JSON-RPC content and observes the head
// or chain id it reports.
func (t *Transport) read(name string, raw []byte, methods []string) (rpcpool.Outcome, string) {
	if len(methods) != 1 || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		return rpcpool.OK, classOK // a batch: each call's error is the caller's
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return rpcpool.Failed, classServer // not JSON-RPC: a proxy's error page
	}
	if e := msg.Error; e != nil {
		switch {
		case rateLimitError(e.Code, e.Message):
			return rpcpool.RateLimited, classRateLimited
		case behindError(e.Message):
			return rpcpool.OK, classBehind
		}
		return rpcpool.OK, classOK
	}
	switch methods[0] {
	case "eth_blockNumber":
		if n, ok := quantity(msg.Result); ok {
			t.Pool.ObserveHead(name, n)
		}
	case "eth_chainId":
		if n, ok := quantity(msg.Result); ok {
			t.Pool.ObserveChainID(name, n)
		}
	case "eth_getBlockByNumber", "eth_getBlockByHash", "eth_getTransactionReceipt":
		// An endpoint that answered with a block has it: its head is at
		// least there, which the follower's next reads at that head need
		// to know before the next probe.
		var b struct {
			Number      json.RawMessage `json:"number"`
			BlockNumber json.RawMessage `json:"blockNumber"`
		}
		if json.Unmarshal(msg.Result, &b) == nil {
			if b.Number == nil {
				b.Number = b.BlockNumber
			}
			if n, ok := quantity(b.Number); ok {
				t.Pool.ObserveAtLeast(name, n)
			}
		}
	}
	return rpcpool.OK, classOK
}

// rateLimitError tells a provider's JSON-RPC rate-limit answer: -32005
// (EIP-1474's "limit exceeded"), 429 as a code, or a message saying so.
func rateLimitError(code int, message string) bool {
	m := strings.ToLower(message)
	return code == -32005 || code == 429 || strings.Contains(m, "rate limit") || strings.Contains(m, "too many requests") ||
		strings.Contains(m, "exceeded") && (strings.Contains(m, "capacity") || strings.Contains(m, "quota") || strings.Contains(m, "limit"))
}

// behindError tells a node's answer that it does not have the block
// asked for: a lagging node, whose answer another endpoint can better.
func behindError(message string) bool {
	m := strings.ToLower(message)
	return strings.Contains(m, "header not found") || strings.Contains(m, "unknown block") ||
		strings.Contains(m, "block not found") || strings.Contains(m, "header for hash not found")
}

// quantity reads a JSON-RPC quantity ("0x1b4").
func quantity(raw json.RawMessage) (uint64, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, "0x") {
		return 0, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	return n, err == nil
}

// methodsOf is the methods a JSON-RPC request body calls, in order.
func methodsOf(body []byte) []string {
	type call struct {
		Method string `json:"method"`
	}
	trimmed := bytes.TrimSpace(body)
	if bytes.HasPrefix(trimmed, []byte("[")) {
		var calls []call
		if json.Unmarshal(trimmed, &calls) != nil {
			return nil
		}
		out := make([]string, len(calls))
		for i, c := range calls {
			out[i] = c.Method
		}
		return out
	}
	var c call
	if json.Unmarshal(trimmed, &c) != nil {
		return nil
	}
	return []string{c.Method}
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return 10 * time.Second
}

func (t *Transport) maxBody() int64 {
	if t.MaxBody > 0 {
		return t.MaxBody
	}
	return 128 << 20
}
