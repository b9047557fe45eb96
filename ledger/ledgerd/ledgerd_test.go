package ledgerd_test

import (
	"testing"

	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/shared/pgtest"
	"github.com/txfence/txfence/shared/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunServesHealthOverMTLS runs the real ledgerd on port 0: migrate (twice),
// serve, health over mutual TLS, and a refusal without a certificate.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	env := servicetest.Merge(servicetest.TLSEnv(ledgerd.Spec.EnvPrefix, pki, ledgerd.Spec.Identity), map[string]string{
		ledgerd.Spec.EnvPrefix + "DATABASE_URL": pgtest.URL(t),
	})
	servicetest.MigrateTwice(t, ledgerd.Run, env)
	svc := servicetest.Start(t, ledgerd.Run, nil, env, "internal")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "gateway", ledgerd.Spec.Identity)
}
