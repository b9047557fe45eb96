// Command signerctl is the operator's, auditor's and approver's command
// for Zone C: signerd's keys, its audit log, and approvals. See
// signer-zonec/SECURITY.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/txfence/txfence/signer-zonec/hardening"
	"github.com/txfence/txfence/signer-zonec/signerctl"
)

func main() {
	// Keys pass through here (keys new and import), and approvers' keys
	// (approver sign): none of them may end up in a core file.
	if err := hardening.PreventCoreDumps(); err != nil {
		fmt.Fprintf(os.Stderr, "signerctl: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := signerctl.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "signerctl: %v\n", err)
		os.Exit(1)
	}
}
