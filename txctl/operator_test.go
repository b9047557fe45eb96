package txctl_test

import (
	"context"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/txmanager"
)

// TestOperatorCommands: resend, bump and abandon of ALLOCATED and SIGNED
// transactions through txctl, each printing the action recorded (the key
// as the operator, pending); --action-id makes a request idempotent, and
// another request under the same id is refused; abandon of a broadcast
// transaction, and of a SIGNED one whose signer's cancels are off, is the
// API's 409; 'actions' lists them, the filler of an abandon once the owner
// recorded it.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{})
	ctx := context.Background()
	owner := g.TxM.NewOwner(t, txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signerA)})
	fence := owner.Fence()
	// to moves a new transfer up to state, as the owner's worker would.
	to := func(requestID string, state txmanager.State) string {
		t.Helper()
		id := uuid.MustParse(field(t, mustRun(t, g.URL, g.Acme, "create", "--chain-id", "31337", "--from", signerA, "--to", bob,
			"--value", "1", "--idempotency-key", requestID).stdout, "tx_id"))
		owner.MoveTo(t, id, state)
		return id.String()
	}
	allocated, signed, broadcast := to("allocated", txmanager.StateAllocated), to("signed", txmanager.StateSigned), to("broadcast", txmanager.StateBroadcasted)

	for _, c := range []struct{ command, id, action string }{
		{"resend", allocated, "resend"}, {"bump", signed, "bump"}, {"abandon", allocated, "abandon"},
	} {
		out := mustRun(t, g.URL, g.Acme, c.command, c.id).stdout
		if field(t, out, "action") != c.action || field(t, out, "tx_id") != c.id || !strings.HasPrefix(field(t, out, "operator"), "key:") ||
			!strings.HasPrefix(field(t, out, "outcome"), "pending") {
			t.Errorf("txctl %s:\n%s", c.command, out)
		}
	}

	const actionID = "0193a2c7-41d0-7e8a-b5f3-2c9d8e7f6a10"
	another := to("another", txmanager.StateAllocated)
	first := mustRun(t, g.URL, g.Acme, "abandon", another, "--action-id", actionID).stdout
	if field(t, first, "action_id") != actionID {
		t.Errorf("abandon with an action id:\n%s", first)
	}
	if again := mustRun(t, g.URL, g.Acme, "abandon", another, "--action-id", actionID).stdout; field(t, again, "action_id") != actionID ||
		!strings.HasPrefix(field(t, again, "repeated"), "yes") {
		t.Errorf("the same again:\n%s", again)
	}
	if r := txctlRun(t, g.URL, g.Acme, "resend", another, "--action-id", actionID); r.code != 1 || !strings.Contains(r.stderr, "Conflict") {
		t.Errorf("another action under the id: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, g.Acme, "abandon", another, "--action-id", "seven"); r.code != 2 || !strings.Contains(r.stderr, "--action-id") {
		t.Errorf("a bad action id: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, g.Acme, "abandon", broadcast); r.code != 1 || !strings.Contains(r.stderr, "cancel it instead") {
		t.Errorf("abandon of a broadcast transaction: exit %d %s", r.code, r.stderr)
	}

	// The owner carries the abandon out; 'actions' shows the filler.
	acts, err := g.TxM.Store.Actions(ctx, uuid.MustParse(allocated))
	if err != nil || len(acts) != 2 {
		t.Fatalf("actions %+v %v", acts, err)
	}
	if _, filler, err := g.TxM.Store.Abandon(ctx, fence, acts[1], txmanager.Fees{MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}); err != nil {
		t.Fatal(err)
	} else {
		out := mustRun(t, g.URL, g.AcmeRead, "actions", allocated).stdout
		if ls := lines(out); len(ls) != 3 || !strings.Contains(ls[0], "FILLER") || !strings.Contains(ls[2], filler.ID.String()) ||
			!strings.Contains(ls[2], "done") {
			t.Errorf("actions of the abandoned transaction:\n%s", out)
		}
	}
	if r := txctlRun(t, g.URL, g.Acme, "abandon", signed); r.code != 1 || !strings.Contains(r.stderr, "cancels are off") {
		t.Errorf("abandon of a SIGNED transaction, cancels off: exit %d %s", r.code, r.stderr)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "abandon", another, "--action-id", actionID).stdout, "/api/v1/tx/{tx_id}/actions", "POST", 200, "")
	if r := txctlRun(t, "", "", "help", "abandon"); r.code != 0 || !strings.Contains(r.stdout, "abandoned") {
		t.Errorf("help abandon: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}
