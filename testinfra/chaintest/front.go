package chaintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Front is a provider's JSON-RPC endpoint in front of a node, for tests of
// provider pools: it passes calls on, counting them, until the test makes
// it misbehave as providers do. A Front serves the node's chain; several
// Fronts before one anvil are several providers of one chain, which
// separate anvils cannot be (each has its own history).
type Front struct {
	URL    string
	target string
	srv    *httptest.Server
	stop   chan struct{}

	mu         sync.Mutex
	mode       frontMode
	lag        uint64
	retryAfter time.Duration
	calls      map[string]int
	times      []time.Time // of each call, batch elements each
}

type frontMode int

const (
	frontPass frontMode = iota
	frontHang
	frontLimited
)

// NewFront starts a Front before the node at target, closed when t ends.
func NewFront(t testing.TB, target string) *Front {
	t.Helper()
	f := &Front{target: target, stop: make(chan struct{}), calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	t.Cleanup(func() {
		f.Kill()
	})
	return f
}

// Lag makes the Front serve the chain as a node that many blocks behind:
// its head, "latest" and "pending" are that far back, and it knows no
// block, receipt or transaction above them, nor any pooled transaction.
func (f *Front) Lag(blocks uint64) { f.set(func() { f.lag = blocks }) }

// Hang makes the Front answer nothing until the caller gives up, as a
// paused (SIGSTOP) node does.
func (f *Front) Hang() { f.set(func() { f.mode = frontHang }) }

// RateLimit makes the Front answer every call with HTTP 429 and
// Retry-After (whole seconds; none when 0).
func (f *Front) RateLimit(retryAfter time.Duration) {
	f.set(func() { f.mode, f.retryAfter = frontLimited, retryAfter })
}

// Heal makes the Front pass calls on again, without lag.
func (f *Front) Heal() { f.set(func() { f.mode, f.lag = frontPass, 0 }) }

// Kill closes the Front's listener and every connection: a killed
// process. It cannot be healed.
func (f *Front) Kill() {
	f.mu.Lock()
	select {
	case <-f.stop:
		f.mu.Unlock()
		return
	default:
		close(f.stop)
	}
	f.mu.Unlock()
	f.srv.CloseClientConnections()
	f.srv.Close()
}

func (f *Front) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

// Calls is the calls the Front took, by method (each call of a batch
// counted), misbehaving or not.
func (f *Front) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for m, n := range f.calls {
		out[m] = n
	}
	return out
}

// Total is the calls the Front took.
func (f *Front) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.times)
}

// MostIn is the most calls the Front took within any span of d.
func (f *Front) MostIn(d time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	most, lo := 0, 0
	for hi, at := range f.times {
		for at.Sub(f.times[lo]) >= d {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// frontCall is one JSON-RPC call.
type frontCall struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	var calls []frontCall
	if batch {
		err = json.Unmarshal(body, &calls)
	} else {
		calls = make([]frontCall, 1)
		err = json.Unmarshal(body, &calls[0])
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	now := time.Now()
	for _, c := range calls {
		f.calls[c.Method]++
		f.times = append(f.times, now)
	}
	mode, lag, retryAfter := f.mode, f.lag, f.retryAfter
	f.mu.Unlock()

	switch mode {
	case frontHang:
		select {
		case <-r.Context().Done():
		case <-f.stop:
		}
		return
	case frontLimited:
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
		}
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	if lag == 0 {
		Forward(r.Context(), w, f.target, body)
		return
	}
	answers := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		a, err := f.behind(r.Context(), c, lag)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answers[i] = a
	}
	w.Header().Set("Content-Type", "application/json")
	if batch {
		_ = json.NewEncoder(w).Encode(answers)
		return
	}
	_, _ = w.Write(answers[0])
}

// behind answers c as a node lag blocks behind the target would.
func (f *Front) behind(ctx context.Context, c frontCall, lag uint64) (json.RawMessage, error) {
	headAnswer, err := f.send(ctx, frontCall{Method: "eth_blockNumber"})
	if err != nil {
		return nil, err
	}
	var head struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal(headAnswer, &head); err != nil {
		return nil, err
	}
	real, err := strconv.ParseUint(strings.TrimPrefix(head.Result, "0x"), 16, 64)
	if err != nil {
		return nil, fmt.Errorf("eth_blockNumber: %q: %w", head.Result, err)
	}
	ours := uint64(0)
	if real > lag {
		ours = real - lag
	}
	tag := json.RawMessage(strconv.Quote(fmt.Sprintf("0x%x", ours)))
	result := func(v any) (json.RawMessage, error) {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ID, "result": v})
		return b, err
	}
	// above reports whether a block tag or number is above our head,
	// after turning latest and pending into our head.
	above := func(i int) bool {
		if i >= len(c.Params) {
			return false
		}
		var s string
		if json.Unmarshal(c.Params[i], &s) != nil {
			return false // a block hash object (EIP-1898): asked by hash
		}
		switch s {
		case "latest", "pending", "safe", "finalized":
			c.Params[i] = tag
			return false
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		return err == nil && n > ours
	}
	switch c.Method {
	case "eth_blockNumber":
		return result(fmt.Sprintf("0x%x", ours))
	case "eth_getBlockByNumber":
		if above(0) {
			return result(nil)
		}
	case "eth_getBalance", "eth_getTransactionCount", "eth_getCode", "eth_getStorageAt", "eth_call", "eth_estimateGas":
		at := map[string]int{"eth_getStorageAt": 2, "eth_getBalance": 1, "eth_getTransactionCount": 1, "eth_getCode": 1, "eth_call": 1, "eth_estimateGas": 1}[c.Method]
		if len(c.Params) <= at {
			c.Params = append(c.Params, json.RawMessage(`"latest"`))
		}
		if above(at) {
			return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ID, "error": map[string]any{"code": -32000, "message": "header not found"}})
		}
	case "eth_feeHistory":
		above(1)
	}
	whole, err := f.send(ctx, c)
	if err != nil {
		return nil, err
	}
	switch c.Method {
	case "eth_getBlockByHash", "eth_getTransactionReceipt", "eth_getTransactionByHash", "eth_getBlockReceipts":
		var a struct {
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(whole, &a) == nil && a.Result != nil && !knownAt(a.Result, ours) {
			return result(nil)
		}
	}
	return whole, nil
}

// knownAt reports whether an answer (a block, a receipt, a transaction,
// or a list of receipts) is one a node at head would know: mined at or
// below it. A pooled transaction (no block number) is not: a lagging node
// has not heard of it.
func knownAt(raw json.RawMessage, head uint64) bool {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return true
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return true
		}
		raw = list[0]
	}
	var v struct {
		Number      *string `json:"number"`
		BlockNumber *string `json:"blockNumber"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return true
	}
	n := v.BlockNumber
	if n == nil {
		n = v.Number
	}
	if n == nil {
		return false
	}
	at, err := strconv.ParseUint(strings.TrimPrefix(*n, "0x"), 16, 64)
	return err == nil && at <= head
}

// send makes call c of the target node and returns its whole answer (a
// result or a JSON-RPC error), with c's id.
func (f *Front) send(ctx context.Context, c frontCall) (json.RawMessage, error) {
	c.JSONRPC = "2.0"
	if c.ID == nil {
		c.ID = json.RawMessage("1")
	}
	if c.Params == nil {
		c.Params = []json.RawMessage{}
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
