package mevrouterd_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

const prefix = "TXFENCE_MEVROUTER_"

// chainEnv is the configuration of a mevrouterd broadcasting to node.
func chainEnv(node *anvil.Node, chainID string) map[string]string {
	return map[string]string{prefix + "CHAIN_ID": chainID, prefix + "PUBLIC_RPC": "anvil=" + node.URL()}
}

// TestRunServesHealthOverMTLS runs the real mevrouterd on port 0 against a
// real anvil: health over mutual TLS, and a refusal without a certificate.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	node := chaintest.Anvil(t, anvil.Options{})
	env := servicetest.Merge(servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity), chainEnv(node, "31337"))
	svc := servicetest.Start(t, mevrouterd.Run, nil, env, "internal")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "txmanager", mevrouterd.Spec.Identity)
}

func TestRunHasNoMigrateCommand(t *testing.T) {
	t.Parallel()
	_, err := servicetest.RunOnce(t, mevrouterd.Run, []string{"migrate"}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown command "migrate"`) {
		t.Errorf("mevrouterd keeps nothing durable, so migrate must be refused: %v", err)
	}
}

// TestRunRefusesBadConfiguration: each mistake is named, and mevrouterd
// does not start.
func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	node := chaintest.Anvil(t, anvil.Options{})
	tlsEnv := servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity)
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no endpoints", map[string]string{prefix + "CHAIN_ID": "31337"}, "PUBLIC_RPC"},
		{"an endpoint of another chain", chainEnv(node, "1"), "CHAIN_ID=1: public endpoint anvil is on chain 31337, not 1"},
		{"no chain check interval", servicetest.Merge(chainEnv(node, "31337"), map[string]string{prefix + "PUBLIC_CHAIN_CHECK_INTERVAL": "0s"}), "PUBLIC_CHAIN_CHECK_INTERVAL"},
		{"a bad endpoint", map[string]string{prefix + "CHAIN_ID": "1", prefix + "PUBLIC_RPC": "anvil=ftp://x"}, "want name=http(s)"},
		{"relays without a key", servicetest.Merge(chainEnv(node, "31337"), map[string]string{prefix + "RELAYS": "dev=http://127.0.0.1:1"}), "RELAY_KEY_FILE"},
		{"a relay kind of no relay", servicetest.Merge(chainEnv(node, "31337"), map[string]string{prefix + "RELAY_KINDS": "x=protect"}), `"x" is not in RELAYS`},
		{"a bad selector", servicetest.Merge(chainEnv(node, "31337"), map[string]string{prefix + "AUTO_PRIVATE_SELECTORS": "0x12"}), "AUTO_PRIVATE_SELECTORS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := servicetest.RunOnce(t, mevrouterd.Run, nil, servicetest.Merge(tlsEnv, tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
