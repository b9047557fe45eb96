package lease_test

import (
	"testing"

	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
