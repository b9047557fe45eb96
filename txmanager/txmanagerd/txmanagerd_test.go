package txmanagerd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunServesHealthOverMTLS runs the real txmanagerd on port 0: migrate (twice),
// serve, health over mutual TLS, and a refusal without a certificate.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	chains := filepath.Join(t.TempDir(), "chains.json")
	if err := os.WriteFile(chains, []byte(`{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"],
		"signers": [{"address": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := servicetest.Merge(servicetest.TLSEnv(txmanagerd.Spec.EnvPrefix, pki, txmanagerd.Spec.Identity), map[string]string{
		txmanagerd.Spec.EnvPrefix + "DATABASE_URL": pgtest.URL(t),
		txmanagerd.Spec.EnvPrefix + "CHAINS_FILE":  chains,
	})
	servicetest.MigrateTwice(t, txmanagerd.Run, env)
	svc := servicetest.Start(t, txmanagerd.Run, nil, env, "internal")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "gateway", txmanagerd.Spec.Identity)
}
