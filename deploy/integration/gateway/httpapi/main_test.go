package httpapi_test

import (
	"testing"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	signerA = gatewaystack.SignerA
	signerB = gatewaystack.SignerB
	bob     = gatewaystack.Bob
)

type (
	tx      = gatewaystack.Tx
	problem = gatewaystack.Problem
)

var transfer = gatewaystack.Transfer

func decode[T any](t testing.TB, b []byte) T { t.Helper(); return servicetest.Decode[T](t, b) }
