// Command txctl is the command-line client of txfence's public API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/txfence/txfence/txctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := txctl.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(txctl.ExitCode(err))
}
