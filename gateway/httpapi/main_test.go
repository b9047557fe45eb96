package httpapi_test

import (
	"testing"

	"github.com/txfence/txfence/gateway/gatewaytest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	signerA = gatewaytest.SignerA
	signerB = gatewaytest.SignerB
	bob     = gatewaytest.Bob
)

type (
	tx      = gatewaytest.Tx
	problem = gatewaytest.Problem
)

var transfer = gatewaytest.Transfer

func decode[T any](t testing.TB, b []byte) T { t.Helper(); return gatewaytest.Decode[T](t, b) }
