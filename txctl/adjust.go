package txctl

import (
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/txfence/txfence/openapi/gatewayapi"
)

const adjustAbout = `Ledger adjustments are the only way an operator changes the books: they
explain an amount reconciliation put in a wallet's suspense account by
moving it to the account it belongs to. The key proposing one is named in
the journal; above the gateway's threshold for the chain and asset (or in
an asset without one) the adjustment waits for a second admin key, made
before the proposal, to approve it ('txctl ledger approve-adjustment').`

var allAdjustmentStatuses = []gatewayapi.LedgerAdjustmentStatus{gatewayapi.AdjustmentPending, gatewayapi.AdjustmentApproved,
	gatewayapi.AdjustmentBooked, gatewayapi.AdjustmentRejected, gatewayapi.AdjustmentRefused, gatewayapi.AdjustmentExpired}

var allCounterKinds = []gatewayapi.LedgerAdjustmentRequestCounterAccountKind{"counterparty", "deposit_source", "fee_expense",
	"in_transit", "opening_balance"}

func adjustmentCommands() []*command {
	const group = "Ledger adjustments (scope admin)"
	byID := func(run func(*env, string) error) func(*flag.FlagSet) func(*env, []string) error {
		return func(*flag.FlagSet) func(*env, []string) error {
			return func(x *env, args []string) error { return run(x, args[0]) }
		}
	}
	return []*command{
		{name: "ledger adjust", group: group, summary: "propose an adjustment of a wallet's suspense account",
			args: "CHAIN_ID WALLET ADJUSTMENT_ID --amount AMOUNT --counter KIND:ADDRESS --reason TEXT [--asset ASSET]", minArgs: 3, maxArgs: 3,
			about: adjustAbout + `

AMOUNT goes into the wallet's suspense account and out of the counter
account: positive clears a negative suspense balance (an inbound movement:
the paying contract's deposit_source), negative a positive one (an
outbound movement: a spender's counterparty, the wallet's fee_expense).
ADJUSTMENT_ID is yours (a ticket number): the same proposal again shows it
as it stands, and books it if the ledger had not answered.`, define: defineAdjust},
		{name: "ledger adjustments", group: group, summary: "the adjustments of the wallets the key may use, newest first",
			args: "[--status STATUS]", define: defineAdjustments},
		{name: "ledger adjustment", group: group, summary: "one adjustment: who proposed, approved or rejected it, and its journal",
			args: "ADJUSTMENT_ID", minArgs: 1, maxArgs: 1, define: byID(func(x *env, id string) error {
				resp, err := x.api.GetLedgerAdjustmentWithResponse(x.ctx, id)
				if err := x.check(fmt.Sprintf("adjustment %q", id), resp, err, http.StatusOK); err != nil {
					return err
				}
				return x.writeAdjustment(resp.Body, resp.JSON200)
			})},
		{name: "ledger approve-adjustment", group: group, summary: "approve a pending adjustment with a second admin key, which books it",
			args: "ADJUSTMENT_ID", minArgs: 1, maxArgs: 1, about: adjustAbout, define: byID(func(x *env, id string) error {
				resp, err := x.api.ApproveLedgerAdjustmentWithResponse(x.ctx, id)
				if err := x.check(fmt.Sprintf("approve adjustment %q", id), resp, err, http.StatusOK); err != nil {
					return err
				}
				return x.writeAdjustment(resp.Body, resp.JSON200)
			})},
		{name: "ledger reject-adjustment", group: group, summary: "end a pending adjustment unbooked (its proposer may withdraw it)",
			args: "ADJUSTMENT_ID", minArgs: 1, maxArgs: 1, define: byID(func(x *env, id string) error {
				resp, err := x.api.RejectLedgerAdjustmentWithResponse(x.ctx, id)
				if err := x.check(fmt.Sprintf("reject adjustment %q", id), resp, err, http.StatusOK); err != nil {
					return err
				}
				return x.writeAdjustment(resp.Body, resp.JSON200)
			})},
	}
}

func defineAdjust(fs *flag.FlagSet) func(*env, []string) error {
	var amount, counter, reason, asset string
	fs.StringVar(&amount, "amount", "", "the `AMOUNT` in base units (wei, a token's smallest unit), signed: see above")
	fs.StringVar(&counter, "counter", "", "the account the amount belongs to, `KIND:ADDRESS` (counterparty, deposit_source, fee_expense, in_transit, opening_balance)")
	fs.StringVar(&reason, "reason", "", "what the investigation found (`TEXT`), kept in the journal's memo")
	fs.StringVar(&asset, "asset", "native", "the `ASSET`: native, or a token contract's address")
	return func(x *env, args []string) error {
		const cmd = "ledger adjust"
		chainID, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || chainID < 1 {
			return usagef(cmd, "%q is not a chain id", args[0])
		}
		if amount == "" {
			return usagef(cmd, "--amount is required")
		}
		kind, address, ok := strings.Cut(counter, ":")
		if !ok {
			return usagef(cmd, "--counter %q: want KIND:ADDRESS", counter)
		}
		k, err := enumFlag(cmd, "counter", kind, gatewayapi.LedgerAdjustmentRequestCounterAccountKind.Valid, allCounterKinds...)
		if err != nil {
			return err
		}
		if strings.TrimSpace(reason) == "" {
			return usagef(cmd, "--reason is required: what the investigation found")
		}
		body := gatewayapi.LedgerAdjustmentRequest{AdjustmentId: args[2], ChainId: chainID, Wallet: args[1], Asset: asset,
			Amount: amount, Reason: reason}
		body.CounterAccount.Kind, body.CounterAccount.Address = k, address
		resp, err := x.api.ProposeLedgerAdjustmentWithResponse(x.ctx, body)
		if err := x.check(fmt.Sprintf("adjustment %q", args[2]), resp, err, http.StatusCreated, http.StatusAccepted, http.StatusOK); err != nil {
			return err
		}
		adj := resp.JSON201
		if adj == nil {
			adj = resp.JSON202
		}
		if adj == nil {
			adj = resp.JSON200
		}
		return x.writeAdjustment(resp.Body, adj)
	}
}

func defineAdjustments(fs *flag.FlagSet) func(*env, []string) error {
	var status string
	var p pagination
	fs.StringVar(&status, "status", "", "only adjustments in this `STATUS` (pending_approval, approved, booked, rejected, refused, expired)")
	definePagination(fs, &p)
	return func(x *env, _ []string) error {
		const cmd = "ledger adjustments"
		var params gatewayapi.ListLedgerAdjustmentsParams
		if given(fs)["status"] {
			st, err := enumFlag(cmd, "status", status, gatewayapi.LedgerAdjustmentStatus.Valid, allAdjustmentStatuses...)
			if err != nil {
				return err
			}
			params.Status = &st
		}
		var err error
		if params.Limit, _, err = p.params(cmd); err != nil {
			return err
		}
		header := false
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListLedgerAdjustmentsWithResponse(x.ctx, &params)
			if err := x.check("adjustments", resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			t := newTable(x.stdout)
			if !header {
				t.row("ADJUSTMENT_ID", "STATUS", "WALLET", "ASSET", "AMOUNT", "PROPOSED_BY", "APPROVED_BY", "JOURNAL_ID")
				header = true
			}
			for _, a := range resp.JSON200.Adjustments {
				approver := ""
				if a.ApprovedBy != nil {
					approver = a.ApprovedBy.Name
				}
				t.row(a.AdjustmentId, string(a.Status), strconv.FormatInt(a.ChainId, 10)+":"+a.Wallet, a.Asset, a.Amount,
					a.ProposedBy.Name, approver, formatInt(a.JournalId))
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

// writeAdjustment prints an adjustment, as it came with --json.
func (x *env) writeAdjustment(body []byte, a *gatewayapi.LedgerAdjustment) error {
	if x.json {
		return x.jsonLine(body)
	}
	var f fields
	f.add("adjustment_id", a.AdjustmentId)
	f.add("status", string(a.Status))
	f.add("wallet", strconv.FormatInt(a.ChainId, 10)+":"+a.Wallet)
	f.add("asset", a.Asset)
	f.add("amount", a.Amount)
	f.add("counter_account", string(a.CounterAccount.Kind)+":"+a.CounterAccount.Address)
	f.add("reason", a.Reason)
	f.add("needs_approval", strconv.FormatBool(a.NeedsApproval))
	f.str("threshold", a.Threshold)
	f.add("proposed_by", a.ProposedBy.Name+" ("+a.ProposedBy.KeyId.String()+")")
	f.add("proposed_at", formatTime(a.ProposedAt))
	f.time("expires_at", a.ExpiresAt)
	if k := a.ApprovedBy; k != nil {
		f.add("approved_by", k.Name+" ("+k.KeyId.String()+")")
	}
	f.time("approved_at", a.ApprovedAt)
	if k := a.RejectedBy; k != nil {
		f.add("rejected_by", k.Name+" ("+k.KeyId.String()+")")
	}
	f.time("rejected_at", a.RejectedAt)
	f.int("journal_id", a.JournalId)
	f.time("booked_at", a.BookedAt)
	f.str("refusal", a.Refusal)
	return f.write(x.stdout)
}
