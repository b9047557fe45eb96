package txmanagerd_test

import (
	"testing"

	"github.com/txfence/txfence/shared/pgtest"
	"github.com/txfence/txfence/shared/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRunServesHealthOverMTLS runs the real txmanagerd on port 0: migrate (twice),
// serve, health over mutual TLS, and a refusal without a certificate.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	env := servicetest.Merge(servicetest.TLSEnv(txmanagerd.Spec.EnvPrefix, pki, txmanagerd.Spec.Identity), map[string]string{
		txmanagerd.Spec.EnvPrefix + "DATABASE_URL": pgtest.URL(t),
	})
	servicetest.MigrateTwice(t, txmanagerd.Run, env)
	svc := servicetest.Start(t, txmanagerd.Run, nil, env, "internal")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "gateway", txmanagerd.Spec.Identity)
}
