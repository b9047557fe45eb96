// Package public is the public route: every transaction goes to every
// configured RPC endpoint at once, in JSON-RPC batches where an endpoint
// takes them, each endpoint behind its own circuit breaker. An endpoint
// that reports another chain id than its chain's gets nothing, and one
// that answers with a rate limit gets nothing until its Retry-After.
package public

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
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
	// ChainCheckEvery is how often every endpoint is asked its chain id
	// again (default a minute); each is asked before its first send too.
	ChainCheckEvery time.Duration
	// Timeout bounds one endpoint's answer to one send, and to one
	// question of its chain id.
	Timeout time.Duration
	// NoBatch lists endpoints that take one eth_sendRawTransaction per HTTP
	// request; the others get a batch's transactions in one JSON-RPC batch.
	NoBatch []string
	// BreakerThreshold consecutive transient failures open an endpoint's
	// circuit breaker for BreakerCooldown (doubling while it keeps failing).
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// HTTP is the client for the endpoints; nil means a default one. Each
	// endpoint gets a copy whose transport notes its Retry-After headers.
	HTTP *http.Client
	Log  *slog.Logger
	// Now is the clock of circuit breakers and rate limits.
	Now func() time.Time
}

// Fanout sends transactions to every public RPC endpoint at once. The first
// acceptance of each transaction answers; the sends to the other endpoints
// go on in the background, bounded by Timeout, so the transaction spreads
// through every mempool we know. An endpoint that is down costs its
// timeout once, then its breaker keeps it out of the way.
type Fanout struct {
	endpoints []*publicEndpoint
	chainID   *big.Int
	timeout   time.Duration
	metrics   *metrics.Chain
	log       *slog.Logger

	stopChecker context.CancelFunc
	checker     sync.WaitGroup
}

var _ mevrouter.PublicRoute = (*Fanout)(nil)

type publicEndpoint struct {
	Endpoint
	client  *rpc.Client
	batch   bool
	breaker *breaker
	limiter *limiter
	chain   chainCheck
}

// scrub is err's text without the endpoint's URL, which net/http's
// errors quote and which often carries an API key: for logs and answers.
func (e *publicEndpoint) scrub(err error) string {
	return strings.ReplaceAll(err.Error(), e.URL, redact(e.URL))
}

// New connects to the endpoints of the chain m counts for (HTTP
// connections are made lazily) and starts the checker that asks them
// their chain id; Close stops it. An endpoint that reports another chain
// than m's gets no sends while it does.
func New(endpoints Endpoints, opts Options, m *metrics.Chain) (*Fanout, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no public RPC endpoint configured")
	}
	if opts.ChainCheckEvery <= 0 {
		opts.ChainCheckEvery = time.Minute
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
	p := &Fanout{chainID: new(big.Int).SetUint64(m.ChainID()), timeout: opts.Timeout, metrics: m, log: opts.Log.With("chain_id", m.ChainID()), stopChecker: func() {}}
	for _, e := range endpoints {
		lim := &limiter{now: opts.Now}
		c, err := rpc.DialOptions(context.Background(), e.URL, rpc.WithHTTPClient(withRetryAfter(opts.HTTP, lim)))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("public endpoint %s: %w", e, err)
		}
		p.endpoints = append(p.endpoints, &publicEndpoint{
			Endpoint: e, client: c, batch: !noBatch[e.Name],
			breaker: newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, opts.Now),
			limiter: lim,
		})
		m.EndpointUp(e.Name, true)
		m.EndpointRateLimit(e.Name, lim.wait)
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stopChecker = stop
	p.checker.Go(func() { p.checkChains(ctx, opts.ChainCheckEvery) })
	return p, nil
}

// Close stops the chain id checker and closes the endpoints' clients.
func (p *Fanout) Close() {
	p.stopChecker()
	p.checker.Wait()
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

// Ready fails when no endpoint can be sent to: each one's breaker is open
// or it reports another chain id, and says which is which. A rate limit
// does not make the route unready: it lasts seconds, and every mevrouterd
// shares the endpoints.
func (p *Fanout) Ready(context.Context) error {
	var why []string
	for _, e := range p.endpoints {
		switch id := e.chain.wrongChain(p.chainID); {
		case id != nil:
			why = append(why, fmt.Sprintf("%s is on chain %s", e.Name, id))
		case !e.breaker.closed():
			why = append(why, e.Name+" is failing (circuit breaker open)")
		default:
			return nil
		}
	}
	return fmt.Errorf("no public RPC endpoint of chain %s can be sent to: %s", p.chainID, strings.Join(why, "; "))
}

// reportUp shows whether the endpoint is in use: its breaker closed, and
// not on another chain.
func (p *Fanout) reportUp(e *publicEndpoint) {
	p.metrics.EndpointUp(e.Name, e.breaker.closed() && e.chain.wrongChain(p.chainID) == nil)
}

// rateLimited keeps the endpoint out after a rate-limited answer (to a
// send, or to the question of its chain id), and logs when it goes out.
func (p *Fanout) rateLimited(e *publicEndpoint, err error) {
	wait, wasIn := e.limiter.limited()
	if wasIn {
		p.log.Warn("public endpoint rate limited: nothing sent to it until it may be asked again",
			"endpoint", e.Name, "retry_in", wait.String(), "err", e.scrub(err))
	}
}

// The results of txfence_mevrouter_endpoint_sends_total besides accepted
// and the error categories.
const (
	resultAccepted    = "accepted"
	resultSkipped     = "skipped"      // circuit breaker open
	resultRateLimited = "rate_limited" // answered with a rate limit, or out until its Retry-After
	resultWrongChain  = "wrong_chain"  // on another chain: nothing sent
)

// endpointAnswer is one endpoint's answers to one Send, per transaction.
type endpointAnswer struct {
	endpoint *publicEndpoint
	errs     []error
}

// Send sends the raw transactions (hashes given) to every endpoint that
// is on the chain, not rate limited and whose breaker allows it, and
// returns once each transaction is accepted by some endpoint, or every
// endpoint has answered, or ctx ends. When no endpoint can be sent to,
// every transaction is Transient, with a message that says why of each.
func (p *Fanout) Send(ctx context.Context, raws [][]byte, hashes []common.Hash) []mevrouter.Sent {
	answers := make(chan endpointAnswer, len(p.endpoints)) // never blocks a late sender
	launched := 0
	var notSent []string // why, of each endpoint not sent to
	for _, e := range p.endpoints {
		// The breaker comes last: allowing lets a half-open breaker's probe go.
		var result, why string
		if id := e.chain.wrongChain(p.chainID); id != nil {
			result, why = resultWrongChain, fmt.Sprintf("%s is on chain %s", e.Name, id)
		} else if wait := e.limiter.wait(); wait > 0 {
			result, why = resultRateLimited, fmt.Sprintf("%s is rate limited for %s more", e.Name, wait.Round(time.Millisecond))
		} else if !e.breaker.allow() {
			result, why = resultSkipped, e.Name+" is failing (circuit breaker open)"
		}
		if result != "" {
			p.metrics.EndpointSends(e.Name, mevrouter.RoutePublic, result, len(raws))
			notSent = append(notSent, why)
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
				out[i].AcceptedBy = append(out[i].AcceptedBy, a.endpoint.Name)
				continue
			}
			firstErr[i] = mevrouter.MoreTelling(firstErr[i], &mevrouter.SendError{Category: cat, Message: a.endpoint.scrub(err), Endpoint: a.endpoint.Name})
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
			out[i].Err = &mevrouter.SendError{Category: nodeerr.Transient,
				Message: fmt.Sprintf("no public RPC endpoint of chain %s can be sent to: %s", p.chainID, strings.Join(notSent, "; "))}
		default:
			out[i].Err = &mevrouter.SendError{Category: nodeerr.Transient, Message: "no public endpoint answered in time: " + context.Cause(ctx).Error()}
		}
	}
	return out
}

// sendTo sends the transactions to one endpoint, in JSON-RPC batches where
// it takes batches, and records metrics, breaker health and rate limits.
// An endpoint never asked its chain id is asked first, and gets nothing
// when it is on another chain or answers with a rate limit. It runs past
// the caller's return, so it has its own deadline.
func (p *Fanout) sendTo(ctx context.Context, e *publicEndpoint, raws [][]byte, hashes []common.Hash) endpointAnswer {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	errs := make([]error, len(raws))
	if err := p.chainFirst(ctx, e); err != nil {
		for i := range errs {
			errs[i] = err
		}
	} else {
		start := time.Now()
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
	}

	// The endpoint is healthy when it judged a transaction, whatever it
	// said, or answered that it is on another chain or rate limited (the
	// chain check and the rate limit keep it out, not its breaker). A
	// batch it answered only as a whole judged none: that is endpoint
	// trouble.
	var healthy bool
	var limited error // the first rate-limited answer
	for i, err := range errs {
		cat := nodeerr.Classify(err)
		var wrong *onWrongChain
		result := string(cat)
		switch {
		case err == nil || cat.Accepted():
			result, healthy = resultAccepted, true
		case errors.As(err, &wrong):
			result, healthy = resultWrongChain, true
		case nodeerr.RateLimited(err):
			result, healthy = resultRateLimited, true
			limited = cmp.Or(limited, err)
		case cat == nodeerr.Transient:
			p.log.Warn("public endpoint failed", "endpoint", e.Name, "tx_hash", hashes[i], "err", e.scrub(err))
		default:
			healthy = true
		}
		p.metrics.EndpointSends(e.Name, mevrouter.RoutePublic, result, 1)
	}
	if limited != nil {
		p.rateLimited(e, limited)
	} else if healthy {
		e.limiter.answered()
	}
	e.breaker.record(healthy)
	p.reportUp(e)
	return endpointAnswer{endpoint: e, errs: errs}
}

// sendEach sends the transactions idx one call each, and records each
// answer in errs. A single call's answer is about its transaction. Once
// the endpoint's time is up, or it answers with a rate limit, the ones not
// yet sent get the same failure.
func (p *Fanout) sendEach(ctx context.Context, e *publicEndpoint, raws [][]byte, idx []int, errs []error) {
	for n, i := range idx {
		var h common.Hash
		errs[i] = e.client.CallContext(ctx, &h, "eth_sendRawTransaction", hexutil.Bytes(raws[i]))
		if (ctx.Err() != nil && nodeerr.Classify(errs[i]) == nodeerr.Transient) || nodeerr.RateLimited(errs[i]) {
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
