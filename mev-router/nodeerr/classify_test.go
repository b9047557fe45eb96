package nodeerr_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// rpcError is a JSON-RPC error as go-ethereum's client returns it: an
// rpc.Error and an rpc.DataError.
type rpcError struct {
	code int
	msg  string
	data any
}

func (e rpcError) Error() string  { return e.msg }
func (e rpcError) ErrorCode() int { return e.code }
func (e rpcError) ErrorData() any { return e.data }

var (
	_ rpc.Error     = rpcError{}
	_ rpc.DataError = rpcError{}
)

// timeoutError is a net.Error that timed out, as a dialer or a conn with a
// deadline returns.
type timeoutError struct{}

func (timeoutError) Error() string   { return "read tcp 127.0.0.1:50000->127.0.0.1:8545: i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

// overloaded says of itself that it is temporary, as the relay client's
// errors do for 5xx and 429.
type overloaded struct{}

func (overloaded) Error() string   { return "relay https://relay.example: HTTP 503: overloaded" }
func (overloaded) Temporary() bool { return true }

// refused says that it is not temporary: its message decides.
type refused struct{ msg string }

func (e refused) Error() string   { return e.msg }
func (e refused) Temporary() bool { return false }

func TestClassify(t *testing.T) {
	t.Parallel()
	var syntaxErr error = json.Unmarshal([]byte("<html>bad gateway</html>"), new(any))
	var wrongShape error = json.Unmarshal([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`), new([]json.RawMessage))
	tests := []struct {
		name string
		err  error
		want nodeerr.Category
	}{
		{"nil", nil, ""},

		{"rpc error", rpcError{code: -32000, msg: "nonce too low: next nonce 5, tx nonce 3"}, nodeerr.NonceTooLow},
		{"rpc error wrapped", fmt.Errorf("send to node-1: %w", rpcError{code: -32000, msg: "already known"}), nodeerr.AlreadyKnown},
		{"rpc error besu code", rpcError{code: -32001, msg: "Nonce too low"}, nodeerr.NonceTooLow},
		{"rpc error unknown message", rpcError{code: -32000, msg: "no such thing"}, nodeerr.Rejected},
		{"rpc error revert", rpcError{code: 3, msg: "execution reverted: nope", data: "0x08c379a0"}, nodeerr.ExecutionReverted},
		// Code 3 is a revert whatever the message, which quotes the
		// contract: its text must not pass for a node's own words.
		{"rpc error revert code", rpcError{code: 3, msg: "already known"}, nodeerr.ExecutionReverted},
		{"rpc error invalid params", rpcError{code: -32602, msg: "invalid argument 0: hex string without 0x prefix"}, nodeerr.Rejected},
		{"rpc error reason in data", rpcError{code: -32000, msg: "transaction rejected", data: "replacement transaction underpriced"}, nodeerr.ReplacementUnderpriced},
		{"rpc error internal", rpcError{code: -32603, msg: "Internal error"}, nodeerr.Transient},
		// EIP-1474: -32005 "Limit exceeded: Request exceeds defined limit".
		{"rpc error limit exceeded", rpcError{code: -32005, msg: "Limit exceeded"}, nodeerr.Transient},
		{"rpc error code 429", rpcError{code: 429, msg: "Your app has exceeded its capacity"}, nodeerr.Transient},
		// JSON-RPC 2.0's codes for a request it could not take as a
		// request: they say nothing of the transaction inside it.
		{"rpc error invalid request", rpcError{code: -32600, msg: "Invalid request"}, nodeerr.Transient},
		{"rpc error parse error", rpcError{code: -32700, msg: "Parse error"}, nodeerr.Transient},
		{"rpc error method not found", rpcError{code: -32601, msg: "the method eth_sendRawTransaction does not exist/is not available"}, nodeerr.Transient},
		{"rpc error batch too large", rpcError{code: -32600, msg: "batch too large"}, nodeerr.Transient},
		{"rpc error response too large", rpcError{code: -32003, msg: "response too large"}, nodeerr.Transient},
		{"rpc error batch size", rpcError{code: -32005, msg: "Number of requests exceeds max batch size"}, nodeerr.Transient},
		{"rpc error rate limit message", rpcError{code: -32000, msg: "request rate limited, try again later"}, nodeerr.Transient},
		// besu uses -32005 for a gas limit above the block's: the message wins.
		{"rpc error message beats code", rpcError{code: -32005, msg: "Transaction gas limit exceeds block gas limit"}, nodeerr.GasLimitExceeded},

		{"http 500", rpc.HTTPError{StatusCode: 500, Status: "500 Internal Server Error"}, nodeerr.Transient},
		{"http 502", rpc.HTTPError{StatusCode: 502, Status: "502 Bad Gateway", Body: []byte("<html>bad gateway</html>")}, nodeerr.Transient},
		{"http 503", rpc.HTTPError{StatusCode: 503, Status: "503 Service Unavailable"}, nodeerr.Transient},
		{"http 504 pointer", &rpc.HTTPError{StatusCode: 504, Status: "504 Gateway Timeout"}, nodeerr.Transient},
		{"http 429", rpc.HTTPError{StatusCode: 429, Status: "429 Too Many Requests"}, nodeerr.Transient},
		{"http 408", rpc.HTTPError{StatusCode: 408, Status: "408 Request Timeout"}, nodeerr.Transient},
		{"http 401", rpc.HTTPError{StatusCode: 401, Status: "401 Unauthorized", Body: []byte("invalid project id")}, nodeerr.Transient},
		{"http 403", rpc.HTTPError{StatusCode: 403, Status: "403 Forbidden"}, nodeerr.Transient},
		{"http 404", rpc.HTTPError{StatusCode: 404, Status: "404 Not Found", Body: []byte("404 page not found\n")}, nodeerr.Transient},
		// A body size limit is the endpoint's (a proxy's), not a node's
		// verdict: nodes refuse an oversized transaction in their own words.
		{"http 413", rpc.HTTPError{StatusCode: 413, Status: "413 Request Entity Too Large", Body: []byte("<html>413 Request Entity Too Large</html>")}, nodeerr.Transient},
		{"http 400 batch error", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request",
			Body: []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`)}, nodeerr.Transient},
		{"http 400 json-rpc body", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request",
			Body: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}`)}, nodeerr.NonceTooLow},
		{"http 400 json-rpc body unknown", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request",
			Body: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no such thing"}}`)}, nodeerr.Rejected},
		{"http 400 plain body", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request", Body: []byte("replacement transaction underpriced")}, nodeerr.ReplacementUnderpriced},
		{"http 400 relay shape", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request", Body: []byte(`{"error":"insufficient funds for gas * price + value"}`)}, nodeerr.InsufficientFunds},
		{"http 400 empty", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request"}, nodeerr.Rejected},
		{"http error wrapped", fmt.Errorf("endpoint a: %w", rpc.HTTPError{StatusCode: 503, Status: "503 Service Unavailable"}), nodeerr.Transient},

		{"deadline", context.DeadlineExceeded, nodeerr.Transient},
		{"deadline wrapped", fmt.Errorf("send: %w", context.DeadlineExceeded), nodeerr.Transient},
		{"canceled", context.Canceled, nodeerr.Transient},
		{"conn deadline", os.ErrDeadlineExceeded, nodeerr.Transient},
		{"net timeout", timeoutError{}, nodeerr.Transient},
		{"net timeout wrapped", fmt.Errorf("post: %w", timeoutError{}), nodeerr.Transient},
		{"eof", io.EOF, nodeerr.Transient},
		{"unexpected eof", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), nodeerr.Transient},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, nodeerr.Transient},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), nodeerr.Transient},
		{"client closed", rpc.ErrClientQuit, nodeerr.Transient},
		{"not json", syntaxErr, nodeerr.Transient},
		// A JSON answer of the wrong shape: go-ethereum's client gives
		// this when a batch is answered by one error object.
		{"json of the wrong shape", wrongShape, nodeerr.Transient},
		{"no result", rpc.ErrNoResult, nodeerr.Transient},
		{"missing from the batch answer", rpc.ErrMissingBatchResponse, nodeerr.Transient},
		{"temporary", overloaded{}, nodeerr.Transient},

		{"not temporary", refused{"relay https://relay.example: HTTP 400: nonce too low"}, nodeerr.NonceTooLow},
		{"plain error", errors.New("replacement transaction underpriced"), nodeerr.ReplacementUnderpriced},
		{"plain error as text", errors.New(`Post "http://127.0.0.1:8545": EOF`), nodeerr.Transient},
		{"plain error unknown", errors.New("something odd"), nodeerr.Rejected},
	}
	want := make(map[string]nodeerr.Category, len(tests))
	got := make(map[string]nodeerr.Category, len(tests))
	for _, tt := range tests {
		want[tt.name] = tt.want
		got[tt.name] = nodeerr.Classify(tt.err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Classify (-want +got):\n%s", diff)
	}
}

// TestClassifyOverHTTP checks Classify against the errors go-ethereum's
// RPC client really returns, from real connections.
func TestClassifyOverHTTP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// unblock releases handlers that hang, so the servers can close.
	unblock := make(chan struct{})
	defer close(unblock)
	respond := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-unblock:
		}
	}))
	t.Cleanup(hang.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		url     string
		timeout time.Duration // 0: ctx's
		want    nodeerr.Category
	}{
		{"closed port", closedURL, 0, nodeerr.Transient},
		{"503", respond(503, "upstream unavailable"), 0, nodeerr.Transient},
		{"429", respond(429, `{"jsonrpc":"2.0","id":1,"error":{"code":429,"message":"rate limited"}}`), 0, nodeerr.Transient},
		{"401", respond(401, "invalid api key"), 0, nodeerr.Transient},
		{"400 with json-rpc error", respond(400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}`), 0, nodeerr.NonceTooLow},
		{"200 with json-rpc error", respond(200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"already known"}}`), 0, nodeerr.AlreadyKnown},
		{"200 not json", respond(200, "<html>maintenance</html>"), 0, nodeerr.Transient},
		{"no answer in time", hang.URL, 100 * time.Millisecond, nodeerr.Transient},
	}
	want := make(map[string]nodeerr.Category, len(tests))
	got := make(map[string]nodeerr.Category, len(tests))
	errs := make(map[string]error, len(tests))
	for _, tt := range tests {
		client, err := rpc.DialContext(ctx, tt.url)
		if err != nil {
			t.Fatalf("%s: dial: %v", tt.name, err)
		}
		callCtx := ctx
		if tt.timeout > 0 {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, tt.timeout)
			defer cancel()
		}
		var hash common.Hash
		err = client.CallContext(callCtx, &hash, "eth_sendRawTransaction", "0x02")
		client.Close()
		if err == nil {
			t.Fatalf("%s: no error", tt.name)
		}
		want[tt.name] = tt.want
		got[tt.name] = nodeerr.Classify(err)
		errs[tt.name] = err
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Classify (-want +got):\n%s\nerrors: %v", diff, errs)
	}
	// The closed port must really have refused, or the case proves nothing.
	if err := errs["closed port"]; !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("closed port: %v (%T), want a refused connection", err, err)
	}
	if err := errs["no answer in time"]; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no answer in time: %v, want a deadline", err)
	}
	var httpErr rpc.HTTPError
	if err := errs["503"]; !errors.As(err, &httpErr) {
		t.Errorf("503: %v (%T), want an rpc.HTTPError", err, err)
	}
}

func TestCategories(t *testing.T) {
	t.Parallel()
	type verdict struct{ Accepted, Retryable, Fatal bool }
	want := map[nodeerr.Category]verdict{
		nodeerr.AlreadyKnown:             {Accepted: true},
		nodeerr.NonceTooLow:              {},
		nodeerr.NonceTooHigh:             {Retryable: true},
		nodeerr.ReplacementUnderpriced:   {},
		nodeerr.Underpriced:              {Retryable: true},
		nodeerr.InsufficientFunds:        {},
		nodeerr.IntrinsicGasTooLow:       {Fatal: true},
		nodeerr.GasLimitExceeded:         {Fatal: true},
		nodeerr.FeeCapTooLow:             {Retryable: true},
		nodeerr.TxFeeCapExceeded:         {Fatal: true},
		nodeerr.TxpoolFull:               {Retryable: true},
		nodeerr.InvalidSenderOrSignature: {Fatal: true},
		nodeerr.TxTypeNotSupported:       {Fatal: true},
		nodeerr.Oversized:                {Fatal: true},
		nodeerr.Malformed:                {Fatal: true},
		nodeerr.ExecutionReverted:        {},
		nodeerr.Rejected:                 {Fatal: true},
		nodeerr.Transient:                {Retryable: true},
		"":                               {},
	}
	got := make(map[nodeerr.Category]verdict)
	for _, c := range append(nodeerr.Categories(), "") {
		got[c] = verdict{c.Accepted(), c.Retryable(), c.Fatal()}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}

	// A caller may change its copy.
	cats := nodeerr.Categories()
	cats[0] = "changed"
	if nodeerr.Categories()[0] != nodeerr.AlreadyKnown {
		t.Error("Categories returned its own slice")
	}
}

// TestCategoriesMatchOpenAPI keeps Categories and the ErrorCategory enum
// of the mev-router API in step: both are the contract with txmanager.
func TestCategoriesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	const spec = "../../openapi/mevrouter.yaml"
	f, err := os.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var enum []nodeerr.Category
	state := 0 // 0: before ErrorCategory, 1: before its enum, 2: in the enum
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case state == 0 && line == "ErrorCategory:":
			state = 1
		case state == 1 && line == "enum:":
			state = 2
		case state == 2 && strings.HasPrefix(line, "- "):
			enum = append(enum, nodeerr.Category(strings.TrimPrefix(line, "- ")))
		case state == 2:
			state = 3
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(enum, nodeerr.Categories()); diff != "" {
		t.Errorf("ErrorCategory enum of %s (-spec +Categories):\n%s", spec, diff)
	}
}

// FuzzClassifyMessage checks that any message, however odd, gets one of
// the categories, and the same one whatever its ASCII case.
func FuzzClassifyMessage(f *testing.F) {
	for _, examples := range [][]example{gethExamples, erigonExamples, nethermindExamples, besuExamples, rethExamples, anvilExamples, hardhatExamples} {
		for _, e := range examples {
			f.Add(e.msg)
		}
	}
	known := make(map[nodeerr.Category]bool)
	for _, c := range nodeerr.Categories() {
		known[c] = true
	}
	f.Fuzz(func(t *testing.T, msg string) {
		c := nodeerr.ClassifyMessage(msg)
		if !known[c] {
			t.Fatalf("ClassifyMessage(%q) = %q, not a category", msg, c)
		}
		if !isASCII(msg) {
			return
		}
		if upper := nodeerr.ClassifyMessage(strings.ToUpper(msg)); upper != c {
			t.Fatalf("ClassifyMessage(%q) = %s, but %s in upper case", msg, c, upper)
		}
	})
}

func isASCII(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII {
			return false
		}
	}
	return true
}

// TestClassifyBatchAnswersOverHTTP sends JSON-RPC batches through
// go-ethereum's client to endpoints that answer them as a whole, and
// checks that none of what the client then returns, for the batch or for
// an element, passes for a node's verdict on a transaction. (mevrouter's
// public route sends such transactions again, in smaller batches.)
func TestClassifyBatchAnswersOverHTTP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// answer serves a batch by the function's answer to its requests' ids.
	answer := func(status int, body func(ids []json.RawMessage) string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var reqs []struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.NewDecoder(r.Body).Decode(&reqs); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ids := make([]json.RawMessage, len(reqs))
			for i, req := range reqs {
				ids[i] = req.ID
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body(ids))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tooLarge := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`
	tests := []struct {
		name string
		url  string
	}{
		// A proxy's or provider's limit, answered with one error object.
		{"one error object", answer(200, func([]json.RawMessage) string { return tooLarge })},
		{"one error object, HTTP 400", answer(400, func([]json.RawMessage) string { return tooLarge })},
		{"HTTP 413", answer(413, func([]json.RawMessage) string { return "<html>413 Request Entity Too Large</html>" })},
		{"HTTP 429", answer(429, func([]json.RawMessage) string {
			return `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"nonce too low"}}` // a proxy's text, whatever it says
		})},
		// geth's answer to a batch above its limit: an array holding one
		// error, under the id of the first call.
		{"geth batch too large", answer(200, func(ids []json.RawMessage) string {
			return `[{"jsonrpc":"2.0","id":` + string(ids[0]) + `,"error":{"code":-32600,"message":"batch too large"}}]`
		})},
		// geth past its batch response size: the calls after the limit
		// get this error.
		{"geth response too large", answer(200, func(ids []json.RawMessage) string {
			return `[{"jsonrpc":"2.0","id":` + string(ids[0]) + `,"error":{"code":-32003,"message":"response too large"}},` +
				`{"jsonrpc":"2.0","id":` + string(ids[1]) + `,"error":{"code":-32003,"message":"response too large"}}]`
		})},
		// An array that answers calls with null results.
		{"null results", answer(200, func(ids []json.RawMessage) string {
			return `[{"jsonrpc":"2.0","id":` + string(ids[0]) + `,"result":null},{"jsonrpc":"2.0","id":` + string(ids[1]) + `,"result":null}]`
		})},
		{"empty array", answer(200, func([]json.RawMessage) string { return `[]` })},
	}
	got := make(map[string][]nodeerr.Category)
	want := make(map[string][]nodeerr.Category)
	errs := make(map[string][]error)
	for _, tt := range tests {
		client, err := rpc.DialContext(ctx, tt.url)
		if err != nil {
			t.Fatalf("%s: dial: %v", tt.name, err)
		}
		var hashes [2]common.Hash
		elems := []rpc.BatchElem{
			{Method: "eth_sendRawTransaction", Args: []any{"0x02"}, Result: &hashes[0]},
			{Method: "eth_sendRawTransaction", Args: []any{"0x02"}, Result: &hashes[1]},
		}
		batchErr := client.BatchCallContext(ctx, elems)
		client.Close()
		// What the batch call returned, then each element's error: each
		// is either nil (nothing to classify) or Transient.
		for _, err := range []error{batchErr, elems[0].Error, elems[1].Error} {
			if err == nil {
				continue
			}
			got[tt.name] = append(got[tt.name], nodeerr.Classify(err))
			want[tt.name] = append(want[tt.name], nodeerr.Transient)
			errs[tt.name] = append(errs[tt.name], err)
		}
		if len(got[tt.name]) == 0 {
			t.Errorf("%s: no error at all from the batch call", tt.name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Classify (-want +got):\n%s\nerrors: %v", diff, errs)
	}
}
