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
