package nodeerr_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

func TestRateLimited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"http 429", rpc.HTTPError{StatusCode: 429, Status: "429 Too Many Requests"}, true},
		{"http 429 pointer, wrapped", fmt.Errorf("batch of 3: %w", &rpc.HTTPError{StatusCode: 429, Status: "429 Too Many Requests"}), true},
		// A 429's body is the proxy's, whatever it says.
		{"http 429 with a refusal's words", rpc.HTTPError{StatusCode: 429, Status: "429 Too Many Requests",
			Body: []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"nonce too low"}}`)}, true},
		{"another client's 429", statusError{http.StatusTooManyRequests, "slow down"}, true},
		{"rpc error -32005", rpcError{code: -32005, msg: "Limit exceeded"}, true},
		{"rpc error code 429", rpcError{code: 429, msg: "Your app has exceeded its capacity"}, true},
		{"rpc error rate limit words", rpcError{code: -32000, msg: "request rate limited, try again later"}, true},
		{"rpc error compute units", rpcError{code: -32000, msg: "Your app has exceeded its compute units per second capacity"}, true},
		{"http 400 with -32005 in its body", rpc.HTTPError{StatusCode: 400, Status: "400 Bad Request",
			Body: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"daily request count exceeded"}}`)}, true},

		// besu's -32005 for a batch above its limit, or a gas limit above
		// the block's: the message says what it is, and it is no rate limit.
		{"-32005 batch size", rpcError{code: -32005, msg: "Number of requests exceeds max batch size"}, false},
		{"-32005 gas limit verdict", rpcError{code: -32005, msg: "Transaction gas limit exceeds block gas limit"}, false},
		{"a verdict", rpcError{code: -32000, msg: "nonce too low"}, false},
		{"http 503", rpc.HTTPError{StatusCode: 503, Status: "503 Service Unavailable"}, false},
		{"timeout", context.DeadlineExceeded, false},
		{"internal error", rpcError{code: -32603, msg: "Internal error"}, false},
	}
	for _, tt := range tests {
		if got := nodeerr.RateLimited(tt.err); got != tt.want {
			t.Errorf("%s: RateLimited(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
		if tt.want && nodeerr.Classify(tt.err) != nodeerr.Transient {
			t.Errorf("%s: a rate limit classified %s, want transient", tt.name, nodeerr.Classify(tt.err))
		}
	}
}
