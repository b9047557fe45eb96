// Command mevrouterd is txfence's broadcaster: public fan-out and private
// (MEV-protected) routes.
package main

import (
	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/shared/daemon"
)

func main() { daemon.Main("mevrouterd", mevrouterd.Run) }
