package mevrouterd_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/shared/servicetest"
)

// TestRunServesHealthOverMTLS runs the real mevrouterd on port 0: health
// over mutual TLS, and a refusal without a certificate.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	svc := servicetest.Start(t, mevrouterd.Run, nil, servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity), "internal")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "txmanager", mevrouterd.Spec.Identity)
}

func TestRunHasNoMigrateCommand(t *testing.T) {
	t.Parallel()
	_, err := servicetest.RunOnce(t, mevrouterd.Run, []string{"migrate"}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown command "migrate"`) {
		t.Errorf("mevrouterd keeps nothing durable, so migrate must be refused: %v", err)
	}
}
