// Command txmanagerd is txfence's fenced transaction manager.
package main

import (
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

func main() { daemon.Main("txmanagerd", txmanagerd.Run) }
