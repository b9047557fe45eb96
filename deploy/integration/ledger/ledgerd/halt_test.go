package ledgerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// TestAChainThatCannotBeFollowedHaltsAlone runs ledgerd on three chains: A
// (31337) is sound; B (31338) forks, while ledgerd books it, below every
// block its scanner keeps (a reorg of 300 blocks, deeper than the window of
// 256); C (31339) has A's endpoint, which answers another chain id. B and C
// halt, each with one alert naming its reason and the gauge
// txfence_ledger_chain_halted at 1, and a reconciliation of them is refused;
// ledgerd stays up, healthy and ready, and goes on booking A: a deposit to
// a wallet of A made after both halts is booked.
func TestAChainThatCannotBeFollowedHaltsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pki := servicetest.PKI(t)
	a := chaintest.Anvil(t, anvil.Options{})
	b := chaintest.Anvil(t, anvil.Options{ChainID: 31338})
	const wrongChain = 31339
	// B's scanner starts at its head and keeps the 256 blocks below it:
	// the reorg below takes them all.
	if err := b.Mine(ctx, 300); err != nil {
		t.Fatal(err)
	}
	wallet := a.Accounts()[1].Address
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	env := servicetest.Merge(servicetest.TLSEnv(ledgerd.Spec.EnvPrefix, pki, ledgerd.Spec.Identity), map[string]string{
		ledgerd.Spec.EnvPrefix + "DATABASE_URL":  pgtest.URL(t),
		ledgerd.Spec.EnvPrefix + "TXMANAGER_URL": txm.URL,
		ledgerd.Spec.EnvPrefix + "CHAIN_RPC":     fmt.Sprintf("%d=%s,%d=%s,%d=%s", a.ChainID(), a.URL(), b.ChainID(), b.URL(), wrongChain, a.URL()),
		ledgerd.Spec.EnvPrefix + "WALLETS":       fmt.Sprintf("%d=%s", a.ChainID(), wallet.Hex()),
		ledgerd.Spec.EnvPrefix + "OPS_ADDR":      "127.0.0.1:0",
	})
	if logs, err := servicetest.RunOnce(t, ledgerd.Run, []string{"migrate"}, env); err != nil {
		t.Fatalf("migrate: %v\n%s", err, logs)
	}
	pool, err := pg.Open(ctx, env[ledgerd.Spec.EnvPrefix+"DATABASE_URL"], pg.PoolOptions{MaxConns: 2, Application: "halt_test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool, slog.New(slog.DiscardHandler))
	svc := servicetest.Start(t, ledgerd.Run, nil, env, "internal", "ops")
	ops := svc.URL("ops")

	// B halts once its scanner has started and the chain forks under it;
	// C at once.
	waitFor(t, svc, "B's scan started at its head", func() bool {
		c, err := store.ScanCursor(ctx, b.ChainID())
		return err == nil && c != nil && c.Number >= 300
	})
	if err := b.Reorg(ctx, 300); err != nil {
		t.Fatal(err)
	}
	waitFor(t, svc, "chain 31338 halted", func() bool { return halted(t, ops)[b.ChainID()] == "1" })
	waitFor(t, svc, "chain 31339 halted", func() bool { return halted(t, ops)[wrongChain] == "1" })

	if got := halted(t, ops)[a.ChainID()]; got != "0" {
		t.Errorf("txfence_ledger_chain_halted{chain_id=%q} = %q, want 0", fmt.Sprint(a.ChainID()), got)
	}
	alerts := map[string]string{} // chain_id -> reason
	for _, rec := range parseAlerts(svc.Logs()) {
		if strings.HasPrefix(fmt.Sprint(rec["msg"]), "ledger: chain halted") {
			id := fmt.Sprint(rec["chain_id"])
			if _, twice := alerts[id]; twice {
				t.Errorf("chain %s halted twice", id)
			}
			alerts[id] = fmt.Sprint(rec["reason"])
		}
	}
	if want := map[string]string{"31338": "deep_reorg", "31339": "wrong_chain"}; fmt.Sprint(alerts) != fmt.Sprint(want) {
		t.Errorf("halt alerts by chain: %v, want %v\nlogs:\n%s", alerts, want, svc.Logs())
	}

	// Still up, healthy and ready: a halted chain's endpoint answers.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(ops + path)
		if err != nil {
			t.Fatalf("%s after the halts: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s after the halts: %d %s", path, resp.StatusCode, body)
		}
	}
	// Nothing reconciles a halted chain: its endpoint may serve another
	// chain, whose balances would go to suspense.
	gateway := servicetest.Client(t, pki, "gateway", ledgerd.Spec.Identity)
	for _, id := range []uint64{b.ChainID(), wrongChain} {
		resp, err := gateway.Post(svc.URL("internal")+"/v1/reconciliations", "application/json", strings.NewReader(fmt.Sprintf(`{"chain_id": %d}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "halted") {
			t.Errorf("reconcile halted chain %d: %d %s, want 503 saying it is halted", id, resp.StatusCode, body)
		}
	}

	// A goes on: a deposit made now is booked.
	deposit := chaintest.Transfer(t, a, a.Accounts()[2].Key, wallet, big.NewInt(1_000_000))
	key := booking.DepositKey(a.ChainID(), deposit.TxHash, deposit.BlockHash)
	waitFor(t, svc, "the deposit on A booked", func() bool {
		_, _, err := store.Journal(ctx, key)
		if err != nil && !errs.Is(err, errs.NotFound) {
			t.Fatal(err)
		}
		return err == nil
	})
	ledgertest.RequireConservation(t, pool)
}

// halted reads txfence_ledger_chain_halted from /metrics, by chain id.
func halted(t *testing.T, ops string) map[uint64]string {
	t.Helper()
	return gauge(t, ops, "txfence_ledger_chain_halted")
}

// parseAlerts are the JSON log records logged with "alert": true.
func parseAlerts(logs string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["alert"] == true {
			out = append(out, rec)
		}
	}
	return out
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, svc *servicetest.Service, what string, cond func() bool) {
	t.Helper()
	wait.ForDescribed(t, time.Minute, cond, func() string { return what + "\nlogs:\n" + svc.Logs() })
}
