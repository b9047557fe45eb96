// Package public is the public route: every transaction goes to every
// configured RPC endpoint at once, in JSON-RPC batches where an endpoint
// takes them, each endpoint behind its own circuit breaker.
package public

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/nodeerr"
)

// Options tunes the public route.
type Options struct {
	// Timeout bounds one endpoint's answer to one send.
	Timeout time.Duration
	// NoBatch lists endpoints that take one eth_sendRawTransaction per HTTP
	// request; the others get a batch's transactions in one JSON-RPC batch.
	NoBatch []string
	// BreakerThreshold consecutive transient failures open an endpoint's
	// circuit breaker for BreakerCooldown (doubling while it keeps failing).
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// HTTP is the client for the endpoints; nil means a default one.
	HTTP *http.Client
	Log  *slog.Logger
	Now  func() time.Time
}

// Fanout sends transactions to every public RPC endpoint at once. The first
// acceptance of each transaction answers; the sends to the other endpoints
// go on in the background, bounded by Timeout, so the transaction spreads
// through every mempool we know. An endpoint that is down costs its
// timeout once, then its breaker keeps it out of the way.
type Fanout struct {
	endpoints []*publicEndpoint
	timeout   time.Duration
	metrics   *metrics.Chain
	log       *slog.Logger
}

var _ mevrouter.PublicRoute = (*Fanout)(nil)

type publicEndpoint struct {
	Endpoint
	client  *rpc.Client
	batch   bool
	breaker *breaker
}

// New connects to the endpoints (HTTP connections are made lazily).
func New(endpoints Endpoints, opts Options, m *metrics.Chain) (*Fanout, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no public RPC endpoint configured")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.BreakerThreshold <= 0 {
		opts.BreakerThreshold = 3
	}
	if opts.BreakerCooldown <= 0 {
		opts.BreakerCooldown = 5 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	noBatch := map[string]bool{}
	for _, n := range opts.NoBatch {
		noBatch[n] = true
	}
	p := &Fanout{timeout: opts.Timeout, metrics: m, log: opts.Log}
	for _, e := range endpoints {
		dialOpts := []rpc.ClientOption{}
		if opts.HTTP != nil {
			dialOpts = append(dialOpts, rpc.WithHTTPClient(opts.HTTP))
		}
		c, err := rpc.DialOptions(context.Background(), e.URL, dialOpts...)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("public endpoint %s: %w", e, err)
		}
		p.endpoints = append(p.endpoints, &publicEndpoint{
			Endpoint: e, client: c, batch: !noBatch[e.Name],
			breaker: newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, opts.Now),
		})
		m.EndpointUp(e.Name, true)
	}
	return p, nil
}

// Close closes the endpoints' clients.
func (p *Fanout) Close() {
	for _, e := range p.endpoints {
		e.client.Close()
	}
}

// Names lists the endpoints.
func (p *Fanout) Names() []string {
	names := make([]string, len(p.endpoints))
	for i, e := range p.endpoints {
		names[i] = e.Name
	}
	return names
}

// Ready fails when every endpoint's breaker is open: nothing can be sent.
func (p *Fanout) Ready(context.Context) error {
	for _, e := range p.endpoints {
		if e.breaker.closed() {
			return nil
		}
	}
	return errors.New("every public RPC endpoint is failing (circuit breakers open)")
}

// endpointAnswer is one endpoint's answers to one Send, per transaction.
type endpointAnswer struct {
	endpoint string
	errs     []error
}

// Send sends the raw transactions (hashes given) to every endpoint whose
// breaker allows it and returns once each transaction is accepted by some
// endpoint, or every endpoint has answered, or ctx ends.
func (p *Fanout) Send(ctx context.Context, raws [][]byte, hashes []common.Hash) []mevrouter.Sent {
	answers := make(chan endpointAnswer, len(p.endpoints)) // never blocks a late sender
	launched := 0
	for _, e := range p.endpoints {
		if !e.breaker.allow() {
			p.metrics.EndpointSends(e.Name, mevrouter.RoutePublic, "skipped", len(raws))
			continue
		}
		launched++
		go func() { answers <- p.sendTo(ctx, e, raws, hashes) }()
	}

	out := make([]mevrouter.Sent, len(raws))
	for i := range out {
		out[i].Hash = hashes[i]
	}
	firstErr := make([]*mevrouter.SendError, len(raws))
	waiting := len(raws)
	for answered := 0; answered < launched && waiting > 0; answered++ {
		var a endpointAnswer
		select {
		case a = <-answers:
		case <-ctx.Done():
			answered = launched // stop waiting; the sends go on
			continue
		}
		for i, err := range a.errs {
			cat := nodeerr.Classify(err)
			if err == nil || cat.Accepted() {
				if !out[i].Accepted {
					waiting--
				}
				out[i].Accepted = true
				out[i].AcceptedBy = append(out[i].AcceptedBy, a.endpoint)
				continue
			}
			firstErr[i] = mevrouter.MoreTelling(firstErr[i], &mevrouter.SendError{Category: cat, Message: err.Error(), Endpoint: a.endpoint})
		}
	}
	for i := range out {
		if out[i].Accepted {
			continue
		}
		switch {
		case firstErr[i] != nil:
			out[i].Err = firstErr[i]
		case launched == 0:
			out[i].Err = &mevrouter.SendError{Category: nodeerr.Transient, Message: "every public RPC endpoint is failing (circuit breakers open)"}
		default:
			out[i].Err = &mevrouter.SendError{Category: nodeerr.Transient, Message: "no public endpoint answered in time: " + context.Cause(ctx).Error()}
		}
	}
	return out
}

// sendTo sends the transactions to one endpoint, in JSON-RPC batches where
// it takes batches, and records metrics and breaker health. It runs past
// the caller's return, so it has its own deadline.
func (p *Fanout) sendTo(ctx context.Context, e *publicEndpoint, raws [][]byte, hashes []common.Hash) endpointAnswer {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	start := time.Now()
	errs := make([]error, len(raws))
	all := make([]int, len(raws))
	for i := range all {
		all[i] = i
	}
	if e.batch && len(raws) > 1 {
		p.sendBatch(ctx, e, raws, all, errs)
	} else {
		p.sendEach(ctx, e, raws, all, errs)
	}
	p.metrics.EndpointLatency(e.Name, mevrouter.RoutePublic, time.Since(start))

	// The endpoint is healthy when it judged a transaction, whatever it
	// said. A batch it answered only as a whole, a rate limit included,
	// judged none: that is endpoint trouble.
	healthy := false
	for i, err := range errs {
		cat := nodeerr.Classify(err)
		result := string(cat)
		if err == nil || cat.Accepted() {
			result = "accepted"
		}
		if cat != nodeerr.Transient {
			healthy = true
		} else {
			p.log.Warn("public endpoint failed", "endpoint", e.Name, "tx_hash", hashes[i], "err", err)
		}
		p.metrics.EndpointSends(e.Name, mevrouter.RoutePublic, result, 1)
	}
	e.breaker.record(healthy)
	p.metrics.EndpointUp(e.Name, e.breaker.closed())
	return endpointAnswer{endpoint: e.Name, errs: errs}
}

// sendEach sends the transactions idx one call each, and records each
// answer in errs. A single call's answer is about its transaction. Once
// the endpoint's time is up, the ones not yet sent get the same failure.
func (p *Fanout) sendEach(ctx context.Context, e *publicEndpoint, raws [][]byte, idx []int, errs []error) {
	for n, i := range idx {
		var h common.Hash
		errs[i] = e.client.CallContext(ctx, &h, "eth_sendRawTransaction", hexutil.Bytes(raws[i]))
		if ctx.Err() != nil && nodeerr.Classify(errs[i]) == nodeerr.Transient {
			for _, j := range idx[n+1:] {
				errs[j] = errs[i]
			}
			return
		}
	}
}

// sendBatch sends the transactions idx in one JSON-RPC batch and records
// in errs the endpoint's answer about each. An answer about the batch as a
// whole is no verdict on any transaction in it: one error object instead
// of an array (a size limit, geth's "batch too large"), an HTTP 4xx, an
// array that lacks calls, or per-call errors that speak of the batch (see
// aboutTheBatch). The transactions without an answer of their own are sent
// again in two halves, and so on down to one call each, while the
// endpoint's time lasts; those still without one get a batchFailure,
// which nodeerr reads as Transient.
//
// An endpoint that is overloaded or failing (HTTP 429, 408, 5xx), refuses
// us (401, 403, ...) or does not answer at all gets no smaller batches:
// more requests at once would not help, and its circuit breaker counts
// the failure.
func (p *Fanout) sendBatch(ctx context.Context, e *publicEndpoint, raws [][]byte, idx []int, errs []error) {
	if len(idx) == 1 {
		p.sendEach(ctx, e, raws, idx, errs)
		return
	}
	elems := make([]rpc.BatchElem, len(idx))
	results := make([]common.Hash, len(idx))
	for j, i := range idx {
		elems[j] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(raws[i])}, Result: &results[j]}
	}
	var again []int // no answer of their own
	why := e.client.BatchCallContext(ctx, elems)
	if why != nil {
		if !answeredAsAWhole(why) {
			for _, i := range idx {
				errs[i] = &batchFailure{n: len(idx), err: why}
			}
			return
		}
		again = idx
	} else {
		// geth answers a batch above its limit with an array holding one
		// error under the first call's id: in an answer that lacks calls,
		// no error is about its call.
		complete := true
		for _, el := range elems {
			if errors.Is(el.Error, rpc.ErrMissingBatchResponse) {
				complete = false
			}
		}
		for j, el := range elems {
			switch {
			case el.Error == nil:
				errs[idx[j]] = nil
			case complete && !aboutTheBatch(el.Error):
				errs[idx[j]] = el.Error
			default:
				again = append(again, idx[j])
				if why == nil || errors.Is(why, rpc.ErrMissingBatchResponse) {
					why = el.Error // the most telling one, for the log
				}
			}
		}
	}
	if len(again) == 0 {
		return
	}
	p.metrics.BatchSplit(e.Name)
	p.log.Warn("public endpoint answered a batch as a whole: sending its transactions again in smaller batches",
		"endpoint", e.Name, "batch", len(idx), "unanswered", len(again), "err", why)
	if ctx.Err() != nil {
		for _, i := range again {
			errs[i] = &batchFailure{n: len(idx), err: why, whole: true}
		}
		return
	}
	half := (len(again) + 1) / 2
	p.sendBatch(ctx, e, raws, again[:half], errs)
	p.sendBatch(ctx, e, raws, again[half:], errs)
}

// answeredAsAWhole reports whether a batch call's error is the endpoint's
// answer to the batch as a whole, such that smaller batches may get
// answers of their own: JSON that is not an array (go-ethereum's client
// returns a *json.UnmarshalTypeError for one error object), or an HTTP
// status that refuses this request (400, 413, and the like). Not a
// failure to get any answer, an HTTP status that speaks of the
// endpoint's state or of us (429, 408, 5xx; 401, 403, 404, 405, 407,
// 421), or an answer that is not JSON at all (a proxy's page).
//
// A connection the endpoint reset or broke while the request was in
// flight counts as an answer to the batch as a whole too: a server that
// closes a connection holding bytes it never read sends a reset, and that
// is how anvil and many proxies enforce a body limit. The client sees the
// broken pipe or the reset on whichever of its write and read notices it
// first, often before the refusal the server wrote; when the read notices
// it, the transport closes the connection under the write, which then
// fails on a closed connection. An endpoint that
// died instead refuses the smaller batches' connections, which ends the
// splitting.
func answeredAsAWhole(err error) bool {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return true
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var httpErr rpc.HTTPError
	if !errors.As(err, &httpErr) {
		return false
	}
	switch s := httpErr.StatusCode; s {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusProxyAuthRequired, http.StatusRequestTimeout, http.StatusMisdirectedRequest, http.StatusTooManyRequests:
		return false
	default:
		return s >= 400 && s < 500
	}
}

// aboutTheBatch reports whether a batch element's error speaks of the
// batch rather than of its call's transaction: anything but a JSON-RPC
// error object (a call missing from the answer, a null result, a result
// that is not a hash), JSON-RPC's codes for a request it could not take as
// such (-32700, -32600), and geth's errors for calls it dropped because the
// batch as a whole was too long to run ("request timed out", -32002) or
// to answer ("response too large", -32003).
func aboutTheBatch(err error) bool {
	var rpcErr rpc.Error
	if !errors.As(err, &rpcErr) {
		return true
	}
	switch rpcErr.ErrorCode() {
	case -32700, -32600:
		return true
	case -32002, -32003:
		msg := strings.ToLower(rpcErr.Error())
		return strings.Contains(msg, "timed out") || strings.Contains(msg, "too large")
	}
	return false
}

// batchFailure is what a transaction gets when its endpoint gave no answer
// about it, only about (or no answer to) the batch it was sent in. It is
// Temporary, so that nodeerr classifies it Transient whatever the words of
// the batch's answer: they are no verdict on this transaction.
type batchFailure struct {
	n     int  // transactions in the batch
	whole bool // the endpoint answered the batch as a whole
	err   error
}

func (e *batchFailure) Error() string {
	if e.whole {
		return fmt.Sprintf("no answer about this transaction, only about its batch of %d: %v", e.n, e.err)
	}
	return fmt.Sprintf("batch of %d: %v", e.n, e.err)
}

func (e *batchFailure) Unwrap() error   { return e.err }
func (e *batchFailure) Temporary() bool { return true }
