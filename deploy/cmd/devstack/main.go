// Command devstack runs the whole txfence stack locally; `make run` builds
// the services and starts it. See deploy/devstack.
package main

import (
	"github.com/txfence/txfence/deploy/devstack"
	"github.com/txfence/txfence/shared/daemon"
)

func main() { daemon.Main("devstack", devstack.Run) }
