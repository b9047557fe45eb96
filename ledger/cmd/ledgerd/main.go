// Command ledgerd is txfence's double-entry ledger of settled chain effects.
package main

import (
	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/shared/daemon"
)

func main() { daemon.Main("ledgerd", ledgerd.Run) }
