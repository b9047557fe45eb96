package gatewaystack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

// Chain is one chain a live stack works on (Options.Chains): a real
// anvil, the development accounts txmanagerd signs for on it, and the
// ERC-20 contracts the ledger opens its wallets in.
type Chain struct {
	Node    *anvil.Node
	Signers []common.Address
	Tokens  []common.Address
	// Confirmations is the depth at which txmanagerd calls a receipt
	// final; 0 means 2.
	Confirmations int
}

// Services are the real services behind a live stack's gateway, each run
// in-process by its Run on port 0 with its own database, as processes
// would run them: one txmanagerd, one mevrouterd and one ledgerd for
// every chain (their chains files and CHAIN_RPC list them all), and
// signerd's API with the development keys and a policy allowing the
// chains.
type Services struct {
	TxManager, MevRouter, Ledger *servicetest.Service
	SignerURL                    string
}

// Logs are every service's logs so far, for a failure's message.
func (s *Services) Logs() string {
	return "txmanagerd:\n" + s.TxManager.Logs() + "\nmevrouterd:\n" + s.MevRouter.Logs() + "\nledgerd:\n" + s.Ledger.Logs()
}

// startServices starts the services of a live stack on opts.Chains with
// the certificates of pki.
func startServices(t testing.TB, pki string, chains []Chain) *Services {
	t.Helper()
	var ids []uint64
	var txmChains, routerChains, rpcs, wallets, tokens []string
	for _, c := range chains {
		id, url := c.Node.ChainID(), c.Node.URL()
		ids = append(ids, id)
		var signers []string
		for _, s := range c.Signers {
			signers = append(signers, fmt.Sprintf(`{"address": %q}`, s.Hex()))
			wallets = append(wallets, fmt.Sprintf("%d=%s", id, s.Hex()))
		}
		for _, tok := range c.Tokens {
			tokens = append(tokens, fmt.Sprintf("%d=%s", id, tok.Hex()))
		}
		confirmations := c.Confirmations
		if confirmations == 0 {
			confirmations = 2
		}
		txmChains = append(txmChains, fmt.Sprintf(`{"chain_id": %d, "rpc": [%q], "confirmations": %d, "signers": [%s]}`,
			id, url, confirmations, strings.Join(signers, ", ")))
		routerChains = append(routerChains, fmt.Sprintf(`{"chain_id": %d, "public_rpc": [{"name": "anvil-%d", "url": %q}]}`, id, id, url))
		rpcs = append(rpcs, fmt.Sprintf("%d=%s", id, url))
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s := &Services{SignerURL: signertest.StartServer(t, signertest.ServerOptions{PKI: pki, PolicyFile: write("policy.json", devPolicyFor(t, ids))}).URL}

	router := mevrouterd.Spec.EnvPrefix
	s.MevRouter = servicetest.Start(t, mevrouterd.Run, nil, servicetest.Merge(servicetest.TLSEnv(router, pki, mevrouterd.Spec.Identity), map[string]string{
		router + "CHAINS_FILE": write("mevrouter-chains.json", `{"chains": [`+strings.Join(routerChains, ", ")+`]}`),
	}), "internal")

	txm := txmanagerd.Spec.EnvPrefix
	txmEnv := servicetest.Merge(servicetest.TLSEnv(txm, pki, txmanagerd.Spec.Identity), map[string]string{
		txm + "DATABASE_URL":  pgtest.URL(t),
		txm + "CHAINS_FILE":   write("txmanager-chains.json", `{"chains": [`+strings.Join(txmChains, ", ")+`]}`),
		txm + "SIGNER_URL":    s.SignerURL,
		txm + "MEVROUTER_URL": s.MevRouter.URL("internal"),
		txm + "NODE_ID":       "live-1",
	})
	if out, err := servicetest.RunOnce(t, txmanagerd.Run, []string{"migrate"}, txmEnv); err != nil {
		t.Fatalf("txmanagerd migrate: %v\n%s", err, out)
	}
	s.TxManager = servicetest.Start(t, txmanagerd.Run, nil, txmEnv, "internal")

	ledger := ledgerd.Spec.EnvPrefix
	ledgerEnv := servicetest.Merge(servicetest.TLSEnv(ledger, pki, ledgerd.Spec.Identity), map[string]string{
		ledger + "DATABASE_URL":  pgtest.URL(t),
		ledger + "TXMANAGER_URL": s.TxManager.URL("internal"),
		ledger + "CHAIN_RPC":     strings.Join(rpcs, ","),
		// The signers are wallets from the start, opened before anything
		// is sent: a wallet the ledger first met in the feed would be
		// opened at whatever block its scanner had reached by then.
		ledger + "WALLETS": strings.Join(wallets, ","),
	})
	if len(tokens) > 0 {
		ledgerEnv[ledger+"TOKENS"] = strings.Join(tokens, ",")
	}
	if out, err := servicetest.RunOnce(t, ledgerd.Run, []string{"migrate"}, ledgerEnv); err != nil {
		t.Fatalf("ledgerd migrate: %v\n%s", err, out)
	}
	s.Ledger = servicetest.Start(t, ledgerd.Run, nil, ledgerEnv, "internal")
	return s
}

// devPolicyFor is signerd's development policy (anvil's accounts), on the
// chains ids instead of anvil's default chain alone.
func devPolicyFor(t testing.TB, ids []uint64) string {
	t.Helper()
	raw, err := os.ReadFile(signertest.DevelopmentPolicy())
	if err != nil {
		t.Fatal(err)
	}
	var pol map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // the limits' numbers stay as written
	if err := dec.Decode(&pol); err != nil {
		t.Fatal(err)
	}
	pol["chains"] = slices.Clone(ids)
	out, err := json.Marshal(pol)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
