// Command signerctl is the operator's and auditor's command for Zone C:
// signerd's keys and its audit log. See signer-zonec/SECURITY.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/txfence/txfence/signer-zonec/signerctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := signerctl.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "signerctl: %v\n", err)
		os.Exit(1)
	}
}
