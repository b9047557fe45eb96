// Command signerd-dev is signerd with the development keystore, for make
// run and tests. Never deploy it: deployments run cmd/signerd, which keeps
// its keys in Vault. See signer-zonec/SECURITY.md.
package main

import (
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/signer-zonec/signerd/devsignerd"
)

func main() { daemon.Main("signerd-dev", devsignerd.Run) }
