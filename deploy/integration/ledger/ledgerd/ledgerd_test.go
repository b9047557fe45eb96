package ledgerd_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunServesHealthOverMTLS runs the real ledgerd on port 0: migrate (twice),
// serve, health over mutual TLS, a refusal without a certificate, and the
// ledger's gauges on the ops listener's /metrics.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	node := chaintest.Anvil(t, anvil.Options{})
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	env := servicetest.Merge(servicetest.TLSEnv(ledgerd.Spec.EnvPrefix, pki, ledgerd.Spec.Identity), map[string]string{
		ledgerd.Spec.EnvPrefix + "DATABASE_URL":  pgtest.URL(t),
		ledgerd.Spec.EnvPrefix + "TXMANAGER_URL": txm.URL,
		ledgerd.Spec.EnvPrefix + "CHAIN_RPC":     fmt.Sprintf("%d=%s", node.ChainID(), node.URL()),
		ledgerd.Spec.EnvPrefix + "OPS_ADDR":      "127.0.0.1:0",
	})
	servicetest.MigrateTwice(t, ledgerd.Run, env)
	svc := servicetest.Start(t, ledgerd.Run, nil, env, "internal", "ops")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "gateway", ledgerd.Spec.Identity)

	resp, err := http.Get(svc.URL("ops") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"txfence_ledger_open_transits 0", "# TYPE txfence_ledger_negative_wallets gauge"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("/metrics: %d, without %q:\n%s", resp.StatusCode, want, body)
		}
	}
}

func TestChainRPCs(t *testing.T) {
	t.Parallel()
	var c ledgerd.ChainRPCs
	if err := c.UnmarshalText([]byte(" 31337=http://127.0.0.1:8545, 1=https://eth.example/v3/secret-key,1=https://other.example/k/secret2 ")); err != nil {
		t.Fatal(err)
	}
	if len(c) != 2 || !slices.Equal(c[31337], []string{"http://127.0.0.1:8545"}) ||
		!slices.Equal(c[1], []string{"https://eth.example/v3/secret-key", "https://other.example/k/secret2"}) {
		t.Errorf("parsed %v", map[uint64][]string(c))
	}
	if s := c.String(); strings.Contains(s, "secret") || s != "1=https://eth.example/…,1=https://other.example/…,31337=http://127.0.0.1:8545" {
		t.Errorf("shown as %q: want hosts only", s)
	}
	for _, bad := range []string{"", "http://127.0.0.1:8545", "0=http://x", "x=http://y", "5=ftp://host", "5=ws://host", "5=http://a,5=http://a", "7=https://host/key?k=secret,8="} {
		var c ledgerd.ChainRPCs
		err := c.UnmarshalText([]byte(bad))
		if err == nil {
			t.Errorf("%q: accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the secret: %v", bad, err)
		}
	}
}

func TestChainAddresses(t *testing.T) {
	t.Parallel()
	var c ledgerd.ChainAddresses
	if err := c.UnmarshalText([]byte(" 31337=0x5FbDB2315678afecb367f032d93F642f64180aa3, 1=0x00000000000000000000000000000000000000a1,31337=0x00000000000000000000000000000000000000b2 ")); err != nil {
		t.Fatal(err)
	}
	if got, want := c.String(), "1=0x00000000000000000000000000000000000000a1,31337=0x5fbdb2315678afecb367f032d93f642f64180aa3,31337=0x00000000000000000000000000000000000000b2"; got != want {
		t.Errorf("parsed %q, want %q", got, want)
	}
	for _, bad := range []string{"0x5FbDB2315678afecb367f032d93F642f64180aa3", "0=0x00000000000000000000000000000000000000a1", "x=0x00", "5=0x123",
		"5=5FbDB2315678afecb367f032d93F642f64180aa3", "5=0x00000000000000000000000000000000000000a1,5=0x00000000000000000000000000000000000000A1"} {
		var c ledgerd.ChainAddresses
		if err := c.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestChainBlocks(t *testing.T) {
	t.Parallel()
	var c ledgerd.ChainBlocks
	if err := c.UnmarshalText([]byte("31337=0, 1=21000000")); err != nil || len(c) != 2 || c[31337] != 0 || c[1] != 21000000 {
		t.Errorf("parsed %v, %v", map[uint64]uint64(c), err)
	}
	for _, bad := range []string{"5", "0=1", "5=-1", "5=x", "5=1,5=2"} {
		var c ledgerd.ChainBlocks
		if err := c.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
