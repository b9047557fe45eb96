// Command gatewayd is txfence's public API gateway.
package main

import (
	"github.com/txfence/txfence/gateway/gatewayd"
	"github.com/txfence/txfence/shared/daemon"
)

func main() { daemon.Main("gatewayd", gatewayd.Run) }
