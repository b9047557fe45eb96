package mevrouter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// PublicOptions tunes the public route.
type PublicOptions struct {
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

// Public sends transactions to every public RPC endpoint at once. The first
// acceptance of each transaction answers; the sends to the other endpoints
// go on in the background, bounded by Timeout, so the transaction spreads
// through every mempool we know. An endpoint that is down costs its
// timeout once, then its breaker keeps it out of the way.
type Public struct {
	endpoints []*publicEndpoint
	timeout   time.Duration
	metrics   *Metrics
	log       *slog.Logger
}

type publicEndpoint struct {
	Endpoint
	client  *rpc.Client
	batch   bool
	breaker *breaker
}

// NewPublic connects to the endpoints (HTTP connections are made lazily).
func NewPublic(endpoints Endpoints, opts PublicOptions, m *Metrics) (*Public, error) {
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
	p := &Public{timeout: opts.Timeout, metrics: m, log: opts.Log}
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
		m.endpointUp.WithLabelValues(e.Name).Set(1)
	}
	return p, nil
}

// Close closes the endpoints' clients.
func (p *Public) Close() {
	for _, e := range p.endpoints {
		e.client.Close()
	}
}

// Names lists the endpoints.
func (p *Public) Names() []string {
	names := make([]string, len(p.endpoints))
	for i, e := range p.endpoints {
		names[i] = e.Name
	}
	return names
}

// Ready fails when every endpoint's breaker is open: nothing can be sent.
func (p *Public) Ready(context.Context) error {
	for _, e := range p.endpoints {
		if e.breaker.closed() {
			return nil
		}
	}
	return errors.New("every public RPC endpoint is failing (circuit breakers open)")
}

// Sent is the public route's answer for one transaction.
type Sent struct {
	Hash       common.Hash
	Accepted   bool
	AcceptedBy []string
	// Err is the most telling refusal when no endpoint accepted.
	Err *SendError
}

// SendError is a refusal, classified.
type SendError struct {
	Category nodeerr.Category
	Message  string
	Endpoint string
}

func (e *SendError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Endpoint, e.Message, e.Category)
}

// endpointAnswer is one endpoint's answers to one Send, per transaction.
type endpointAnswer struct {
	endpoint string
	errs     []error
}

// Send sends the raw transactions (hashes given) to every endpoint whose
// breaker allows it and returns once each transaction is accepted by some
// endpoint, or every endpoint has answered, or ctx ends.
func (p *Public) Send(ctx context.Context, raws [][]byte, hashes []common.Hash) []Sent {
	answers := make(chan endpointAnswer, len(p.endpoints)) // never blocks a late sender
	launched := 0
	for _, e := range p.endpoints {
		if !e.breaker.allow() {
			p.metrics.sends.WithLabelValues(e.Name, "public", "skipped").Add(float64(len(raws)))
			continue
		}
		launched++
		go func() { answers <- p.sendTo(ctx, e, raws, hashes) }()
	}

	out := make([]Sent, len(raws))
	for i := range out {
		out[i].Hash = hashes[i]
	}
	firstErr := make([]*SendError, len(raws))
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
			firstErr[i] = moreTelling(firstErr[i], &SendError{Category: cat, Message: err.Error(), Endpoint: a.endpoint})
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
			out[i].Err = &SendError{Category: nodeerr.Transient, Message: "every public RPC endpoint is failing (circuit breakers open)"}
		default:
			out[i].Err = &SendError{Category: nodeerr.Transient, Message: "no public endpoint answered in time: " + context.Cause(ctx).Error()}
		}
	}
	return out
}

// moreTelling keeps the refusal that says most: a node's own verdict beats
// a timeout or a connection error, and the first verdict beats later ones.
func moreTelling(have, next *SendError) *SendError {
	if have == nil || (have.Category == nodeerr.Transient && next.Category != nodeerr.Transient) {
		return next
	}
	return have
}

// sendTo sends the transactions to one endpoint, in one JSON-RPC batch
// where it takes batches, and records metrics and breaker health. It runs
// past the caller's return, so it has its own deadline.
func (p *Public) sendTo(ctx context.Context, e *publicEndpoint, raws [][]byte, hashes []common.Hash) endpointAnswer {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
	defer cancel()
	start := time.Now()
	errs := make([]error, len(raws))
	var callErr error
	if e.batch && len(raws) > 1 {
		elems := make([]rpc.BatchElem, len(raws))
		results := make([]common.Hash, len(raws))
		for i, raw := range raws {
			elems[i] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(raw)}, Result: &results[i]}
		}
		callErr = e.client.BatchCallContext(ctx, elems)
		for i := range elems {
			errs[i] = elems[i].Error
		}
	} else {
		for i, raw := range raws {
			var h common.Hash
			errs[i] = e.client.CallContext(ctx, &h, "eth_sendRawTransaction", hexutil.Bytes(raw))
			if nodeerr.Classify(errs[i]) == nodeerr.Transient && ctx.Err() != nil {
				callErr = errs[i] // out of time: the rest would fail the same way
				break
			}
		}
	}
	if callErr != nil {
		for i := range errs {
			if errs[i] == nil || nodeerr.Classify(errs[i]) == nodeerr.Transient {
				errs[i] = callErr
			}
		}
	}
	p.metrics.latency.WithLabelValues(e.Name, "public").Observe(time.Since(start).Seconds())

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
		p.metrics.sends.WithLabelValues(e.Name, "public", result).Inc()
	}
	e.breaker.record(healthy)
	up := 0.0
	if e.breaker.closed() {
		up = 1
	}
	p.metrics.endpointUp.WithLabelValues(e.Name).Set(up)
	return endpointAnswer{endpoint: e.Name, errs: errs}
}
