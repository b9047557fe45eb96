// Package signerctl is the command operators, auditors and approvers run
// against Zone C: signerd's keys (keys new|import|list), its audit log
// (audit verify|export|new-checkpoint-key), the start nonces of accounts
// with history (nonces start|list), and an approver's key and approvals
// (approver new|sign). It runs on their machines, not in the
// serving process: the serving binary, signerd, links none of it. Its
// settings are signerd's TXFENCE_SIGNER_* variables.
package signerctl

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// envPrefix starts the name of every setting signerctl reads: signerd's.
const envPrefix = "TXFENCE_SIGNER_"

const usage = "usage: signerctl keys new|import|list [--json] | signerctl audit verify|export|new-checkpoint-key | signerctl approver new|sign | signerctl nonces start|list (settings come from TXFENCE_SIGNER_* variables)"

// Run runs signerctl; args are the arguments after the program name, stdin
// is where keys import reads a key.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "keys":
		return keysCommand(ctx, args[1:], getenv, stdin, stdout)
	case "audit":
		return auditCommand(ctx, args[1:], getenv, stdout)
	case "approver":
		return approverCommand(args[1:], stdin, stdout)
	case "nonces":
		return noncesCommand(ctx, args[1:], getenv, stdout)
	}
	return fmt.Errorf("unknown command %q; %s", args[0], usage)
}
