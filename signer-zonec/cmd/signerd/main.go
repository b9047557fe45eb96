// Command signerd is txfence's Zone C signer. See signer-zonec/SECURITY.md.
package main

import (
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/signer-zonec/signerd"
)

func main() { daemon.Main("signerd", signerd.Run) }
