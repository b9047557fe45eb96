package poolmetrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/shared/rpcpool/poolmetrics"
)

func TestEveryEndpointIsExportedWithItsHealthAndBudget(t *testing.T) {
	t.Parallel()
	paid := rpcpool.Endpoint{Name: "paid", URL: "http://paid", RPS: 5, Credits: &rpcpool.Credits{Units: 100, Period: time.Hour, Default: 10}}
	p, err := rpcpool.New(10, []rpcpool.Endpoint{paid, {Name: "free", URL: "http://free"}}, rpcpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ObserveChainID("paid", 10)
	p.ObserveChainID("free", 1)
	p.ObserveHead("paid", 120)
	if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call", "eth_call"}}); err != nil {
		t.Fatal(err)
	}
	p.Done("paid", rpcpool.Result{Outcome: rpcpool.OK, Latency: 250 * time.Millisecond})
	p.Done("paid", rpcpool.Result{Outcome: rpcpool.Failed, Class: "timeout"})

	c := &poolmetrics.Collector{}
	c.Add(p)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP txfence_rpc_endpoint_calls_total JSON-RPC requests sent to an endpoint (a batch counts once), by class: ok, timeout, connection, http_5xx, http_error, rate_limited, behind.
# TYPE txfence_rpc_endpoint_calls_total counter
txfence_rpc_endpoint_calls_total{chain_id="10",class="ok",endpoint="paid"} 1
txfence_rpc_endpoint_calls_total{chain_id="10",class="timeout",endpoint="paid"} 1
# HELP txfence_rpc_endpoint_credits_left Credit units left in the endpoint's budget this period (absent without one).
# TYPE txfence_rpc_endpoint_credits_left gauge
txfence_rpc_endpoint_credits_left{chain_id="10",endpoint="paid"} 80
# HELP txfence_rpc_endpoint_head The latest block the endpoint reported.
# TYPE txfence_rpc_endpoint_head gauge
txfence_rpc_endpoint_head{chain_id="10",endpoint="free"} 0
txfence_rpc_endpoint_head{chain_id="10",endpoint="paid"} 120
# HELP txfence_rpc_endpoint_head_lag_blocks Blocks the endpoint is behind the best head of the chain's endpoints.
# TYPE txfence_rpc_endpoint_head_lag_blocks gauge
txfence_rpc_endpoint_head_lag_blocks{chain_id="10",endpoint="free"} 120
txfence_rpc_endpoint_head_lag_blocks{chain_id="10",endpoint="paid"} 0
# HELP txfence_rpc_endpoint_up 1 while the endpoint takes calls; 0 while it is on the wrong chain, rate limited, or failing.
# TYPE txfence_rpc_endpoint_up gauge
txfence_rpc_endpoint_up{chain_id="10",endpoint="free"} 0
txfence_rpc_endpoint_up{chain_id="10",endpoint="paid"} 1
`
	names := []string{"txfence_rpc_endpoint_calls_total", "txfence_rpc_endpoint_credits_left", "txfence_rpc_endpoint_head",
		"txfence_rpc_endpoint_head_lag_blocks", "txfence_rpc_endpoint_up"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The request budget: 5 tokens, 2 taken by the batch, refilled a
	// little since; and the latency, present.
	if n, err := testutil.GatherAndCount(reg, "txfence_rpc_endpoint_requests_left", "txfence_rpc_endpoint_latency_seconds"); err != nil || n != 3 {
		t.Errorf("%d requests_left and latency series, %v; want 1 and 2", n, err)
	}
}
