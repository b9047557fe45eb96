package txctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"

	"github.com/txfence/txfence/openapi/gatewayapi"
)

var allLedgerKinds = []gatewayapi.LedgerAccountKind{gatewayapi.LedgerWallet, gatewayapi.LedgerFeeExpense,
	gatewayapi.LedgerSuspense, gatewayapi.LedgerInTransit, gatewayapi.LedgerOpeningBalance}

const ledgerAbout = `Amounts are the ledger's: integers in wei (or a token's smallest unit),
exact, negative when they take from the account.`

func ledgerCommands() []*command {
	const group = "Ledger (scope ledger:read)"
	return []*command{
		{name: "ledger balances", group: group, summary: "a signer's wallet balance in each asset (or its accounts of another kind)",
			args: "CHAIN_ID ADDRESS [--kind KIND] [--asset ASSET] [--at-block N]", minArgs: 2, maxArgs: 2,
			about: `Lists the ledger accounts of one of the tenant's signers on one chain, of
one kind (wallet by default: what the signer holds, one account per
asset), each with its balance now or, with --at-block, as of that block.
` + ledgerAbout, define: defineLedgerBalances},
		{name: "ledger statement", group: group, summary: "an account's entries with the running balance, oldest first",
			args: "ACCOUNT_ID", minArgs: 1, maxArgs: 1,
			about: `The account's entries in the order they were booked, each with its
journal and the balance after it: the last balance of the last page is the
account's balance. ACCOUNT_ID is from 'txctl ledger balances'.
` + ledgerAbout, define: defineLedgerStatement},
		{name: "ledger journal", group: group, summary: "one journal with its entries on the tenant's accounts", args: "JOURNAL_ID",
			minArgs: 1, maxArgs: 1,
			about: `A booked fact (a confirmed or reverted transaction, a deposit, a reversal,
a reconciliation difference, an opening balance) with its entries on the
tenant's accounts; the other side (a counterparty's) is not shown.
JOURNAL_ID is from 'txctl ledger statement'.
` + ledgerAbout, define: func(*flag.FlagSet) func(*env, []string) error { return runLedgerJournal }},
		{name: "ledger transits", group: group, summary: "a signer's transfers between chains, newest first",
			args: "CHAIN_ID ADDRESS [--status STATUS]", minArgs: 2, maxArgs: 2,
			about: `Lists the transfers between chains with an end at one of the tenant's
signers on one chain, newest first: pending (neither end booked), open
(value in transit) or completed (both ends booked, and the bridge fee).
` + ledgerAbout, define: defineLedgerTransits},
		{name: "ledger transit", group: group, summary: "one transfer between chains, both ends and the bridge fee", args: "TRANSIT_ID",
			minArgs: 1, maxArgs: 1,
			about: `A transfer between chains: each end's transaction and, once booked, its
journal and what crossed the wallet's in_transit account; the bridge fee
once both ends are booked. TRANSIT_ID is the metadata.transit_id the two
transactions carry.
` + ledgerAbout, define: func(*flag.FlagSet) func(*env, []string) error { return runLedgerTransit }},
	}
}

// parseLedgerID reads an account or journal id argument.
func parseLedgerID(cmd, what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef(cmd, "%q is not a ledger %s id (a positive integer)", s, what)
	}
	return id, nil
}

func defineLedgerBalances(fs *flag.FlagSet) func(*env, []string) error {
	var kind, asset string
	var atBlock int64
	var p pagination
	fs.StringVar(&kind, "kind", "", "accounts of this `KIND` (wallet, fee_expense, suspense, in_transit, opening_balance; default wallet)")
	fs.StringVar(&asset, "asset", "", "only this `ASSET`: native, or a token contract's address")
	fs.Int64Var(&atBlock, "at-block", 0, "balances as of block `N` (default: now)")
	definePagination(fs, &p)
	return func(x *env, args []string) error {
		const cmd = "ledger balances"
		set := given(fs)
		chainID, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || chainID < 1 {
			return usagef(cmd, "%q is not a chain id", args[0])
		}
		params := gatewayapi.ListLedgerAccountsParams{ChainId: chainID, Address: args[1]}
		if set["kind"] {
			k, err := enumFlag(cmd, "kind", kind, gatewayapi.LedgerAccountKind.Valid, allLedgerKinds...)
			if err != nil {
				return err
			}
			params.Kind = &k
		}
		if set["asset"] {
			params.Asset = &asset
		}
		if set["at-block"] {
			if atBlock < 0 {
				return usagef(cmd, "--at-block %d: want a block number", atBlock)
			}
			params.AtBlock = &atBlock
		}
		if params.Limit, _, err = p.params(cmd); err != nil {
			return err
		}
		header := false
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListLedgerAccountsWithResponse(x.ctx, &params)
			if err := x.check(fmt.Sprintf("balances of %d:%s", chainID, args[1]), resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			t := newTable(x.stdout)
			if !header {
				t.row("ACCOUNT_ID", "KIND", "ASSET", "BALANCE", "AS_OF")
				header = true
			}
			for _, a := range resp.JSON200.Accounts {
				asOf := "now (version " + formatInt(a.Version) + ")"
				if a.AsOfBlock != nil {
					asOf = "block " + strconv.FormatInt(*a.AsOfBlock, 10)
				}
				t.row(strconv.FormatInt(a.AccountId, 10), string(a.Kind), a.Asset, a.Balance, asOf)
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

func defineLedgerStatement(fs *flag.FlagSet) func(*env, []string) error {
	var p pagination
	definePagination(fs, &p)
	return func(x *env, args []string) error {
		const cmd = "ledger statement"
		id, err := parseLedgerID(cmd, "account", args[0])
		if err != nil {
			return err
		}
		var params gatewayapi.ListLedgerAccountEntriesParams
		if params.Limit, _, err = p.params(cmd); err != nil {
			return err
		}
		header := false
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListLedgerAccountEntriesWithResponse(x.ctx, id, &params)
			if err := x.check(fmt.Sprintf("statement of account %d", id), resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			t := newTable(x.stdout)
			if !header {
				t.row("ENTRY_ID", "JOURNAL_ID", "KIND", "TX_HASH", "BLOCK", "AMOUNT", "BALANCE")
				header = true
			}
			for _, e := range resp.JSON200.Entries {
				kind := string(e.JournalKind)
				if e.Reverses != nil {
					kind += " of " + strconv.FormatInt(*e.Reverses, 10)
				}
				t.row(strconv.FormatInt(e.EntryId, 10), strconv.FormatInt(e.JournalId, 10), kind, deref(e.TxHash),
					formatInt(e.BlockNumber), e.Amount, e.Balance)
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

func runLedgerJournal(x *env, args []string) error {
	id, err := parseLedgerID("ledger journal", "journal", args[0])
	if err != nil {
		return err
	}
	resp, err := x.api.GetLedgerJournalWithResponse(x.ctx, id)
	if err := x.check(fmt.Sprintf("journal %d", id), resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	j := resp.JSON200
	var f fields
	f.add("journal_id", strconv.FormatInt(j.JournalId, 10))
	f.add("kind", string(j.Kind))
	f.add("chain_id", strconv.FormatInt(j.ChainId, 10))
	f.str("tx_hash", j.TxHash)
	f.int("block_number", j.BlockNumber)
	f.str("block_hash", j.BlockHash)
	if j.Status != nil {
		f.add("status", string(*j.Status))
	}
	f.int("reverses", j.Reverses)
	f.int("reversed_by", j.ReversedBy)
	// The memo as it came: decoded, a number in it could lose digits.
	var raw struct {
		Memo json.RawMessage `json:"memo"`
	}
	if err := json.Unmarshal(resp.Body, &raw); err == nil && len(j.Memo) > 0 {
		f.add("memo", string(raw.Memo))
	}
	f.add("created_at", formatTime(j.CreatedAt))
	if err := f.write(x.stdout); err != nil {
		return err
	}
	fmt.Fprintln(x.stdout)
	t := newTable(x.stdout, "ENTRY_ID", "ACCOUNT_ID", "KIND", "ADDRESS", "ASSET", "AMOUNT")
	for _, e := range j.Entries {
		a := e.Account
		t.row(strconv.FormatInt(e.EntryId, 10), strconv.FormatInt(a.AccountId, 10), string(a.Kind), a.Address, a.Asset, e.Amount)
	}
	return t.flush()
}

var allTransitStatuses = []gatewayapi.LedgerTransitStatus{gatewayapi.LedgerTransitPending, gatewayapi.LedgerTransitOpen,
	gatewayapi.LedgerTransitCompleted}

func defineLedgerTransits(fs *flag.FlagSet) func(*env, []string) error {
	var status string
	var p pagination
	fs.StringVar(&status, "status", "", "only transfers in this `STATUS` (pending, open, completed)")
	definePagination(fs, &p)
	return func(x *env, args []string) error {
		const cmd = "ledger transits"
		chainID, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || chainID < 1 {
			return usagef(cmd, "%q is not a chain id", args[0])
		}
		params := gatewayapi.ListLedgerTransitsParams{ChainId: chainID, Address: args[1]}
		if given(fs)["status"] {
			st, err := enumFlag(cmd, "status", status, gatewayapi.LedgerTransitStatus.Valid, allTransitStatuses...)
			if err != nil {
				return err
			}
			params.Status = &st
		}
		if params.Limit, _, err = p.params(cmd); err != nil {
			return err
		}
		header := false
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListLedgerTransitsWithResponse(x.ctx, &params)
			if err := x.check(fmt.Sprintf("transits of %d:%s", chainID, args[1]), resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			if x.json {
				return resp.JSON200.NextCursor, x.jsonLine(resp.Body)
			}
			t := newTable(x.stdout)
			if !header {
				t.row("TRANSIT_ID", "STATUS", "FROM", "SENT", "TO", "RECEIVED", "BRIDGE_FEE", "OPENED_AT")
				header = true
			}
			for _, tr := range resp.JSON200.Transits {
				var to, received string
				if d := tr.Destination; d != nil {
					to, received = transitEndName(d), deref(d.Amount)
				}
				t.row(tr.TransitId, string(tr.Status), transitEndName(&tr.Source), deref(tr.Source.Amount), to, received, deref(tr.BridgeFee),
					formatTimePtr(tr.OpenedAt))
			}
			return resp.JSON200.NextCursor, t.flush()
		})
	}
}

// transitEndName is an end as chain:wallet, and once booked, /asset.
func transitEndName(e *gatewayapi.LedgerTransitEnd) string {
	name := strconv.FormatInt(e.ChainId, 10) + ":" + e.Wallet
	if e.Asset != nil {
		name += "/" + *e.Asset
	}
	return name
}

func runLedgerTransit(x *env, args []string) error {
	id := args[0]
	resp, err := x.api.GetLedgerTransitWithResponse(x.ctx, id)
	if err := x.check(fmt.Sprintf("transit %q", id), resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	tr := resp.JSON200
	var f fields
	f.add("transit_id", tr.TransitId)
	f.add("status", string(tr.Status))
	ends := []struct {
		name string
		end  *gatewayapi.LedgerTransitEnd
	}{{"source", &tr.Source}, {"destination", tr.Destination}}
	for _, e := range ends {
		if e.end == nil {
			f.add(e.name, "not linked yet")
			continue
		}
		f.add(e.name+".tx_id", e.end.TxId)
		f.add(e.name+".chain_id", strconv.FormatInt(e.end.ChainId, 10))
		f.add(e.name+".wallet", e.end.Wallet)
		f.int(e.name+".journal_id", e.end.JournalId)
		f.str(e.name+".tx_hash", e.end.TxHash)
		f.str(e.name+".block_hash", e.end.BlockHash)
		f.str(e.name+".asset", e.end.Asset)
		f.str(e.name+".amount", e.end.Amount)
	}
	f.str("bridge", tr.Bridge)
	f.str("bridge_fee", tr.BridgeFee)
	f.int("fee_journal_id", tr.FeeJournalId)
	f.time("opened_at", tr.OpenedAt)
	f.time("completed_at", tr.CompletedAt)
	f.time("alerted_at", tr.AlertedAt)
	f.add("updated_at", formatTime(tr.UpdatedAt))
	return f.write(x.stdout)
}
