package txctl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/httpapi"
	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
)

// TestLedger runs the ledger commands against the real API and a real
// ledger: balances now and as of a block, by kind, a statement across
// pages, a journal with the tenant's entries only, --json that follows
// the spec, and how usage errors, another tenant's accounts and a key
// without ledger:read end.
func TestLedger(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true})
	g.Ledger.Book(t, ledger.Opening, "opening-a", 1,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, 10000), gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, signerA, -10000))
	payment := g.Ledger.Transfer(t, "a-to-bob", signerA, bob, 1000, 21, 5)

	out := mustRun(t, g.URL, g.Acme, "ledger", "balances", "31337", signerA).stdout
	rows := lines(out)
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "ACCOUNT_ID") || !strings.Contains(rows[1], " wallet ") ||
		!strings.Contains(rows[1], " native ") || !strings.Contains(rows[1], " 8979 ") || !strings.Contains(rows[1], "now (version") {
		t.Fatalf("ledger balances:\n%s", out)
	}
	walletID := strings.Fields(rows[1])[0]
	if out := mustRun(t, g.URL, g.Acme, "ledger", "balances", "31337", signerA, "--at-block", "4").stdout; !strings.Contains(out, " 10000 ") || !strings.Contains(out, "block 4") {
		t.Errorf("ledger balances --at-block 4:\n%s", out)
	}
	if out := mustRun(t, g.URL, g.Acme, "ledger", "balances", "31337", signerA, "--kind", "fee_expense").stdout; !strings.Contains(out, " fee_expense ") || !strings.Contains(out, " 21 ") {
		t.Errorf("ledger balances --kind fee_expense:\n%s", out)
	}
	asJSON := mustRun(t, g.URL, g.Acme, "--json", "ledger", "balances", "31337", signerA).stdout
	conforms(t, asJSON, "/api/v1/ledger/accounts", "GET", 200, "")

	// The statement a page of one at a time, with --all.
	out = mustRun(t, g.URL, g.Acme, "ledger", "statement", walletID, "--limit", "1", "--all").stdout
	rows = lines(out)
	cells := func(i int) []string { return strings.Fields(rows[i]) }
	if len(rows) != 4 || cells(0)[0] != "ENTRY_ID" || strings.Join(cells(1)[5:], " ") != "10000 10000" ||
		cells(3)[1] != fmt.Sprint(payment) || cells(3)[6] != "8979" {
		t.Errorf("ledger statement --all:\n%s", out)
	}
	first := mustRun(t, g.URL, g.Acme, "ledger", "statement", walletID, "--limit", "1").stdout
	if !strings.Contains(first, "more: --cursor ") {
		t.Errorf("a first page without --all does not say how to go on:\n%s", first)
	}
	pages := lines(mustRun(t, g.URL, g.Acme, "--json", "ledger", "statement", walletID, "--limit", "2", "--all").stdout)
	if len(pages) != 2 {
		t.Errorf("--json --all printed %d pages, want 2", len(pages))
	}
	for _, p := range pages {
		conforms(t, p, "/api/v1/ledger/accounts/{account_id}/entries", "GET", 200, "")
	}

	journal := mustRun(t, g.URL, g.Acme, "ledger", "journal", fmt.Sprint(payment)).stdout
	if field(t, journal, "kind") != "confirmed" || field(t, journal, "status") != "success" || field(t, journal, "block_number") != "5" ||
		strings.Contains(journal, "counterparty") || strings.Count(journal, strings.ToLower(signerA)) != 3 {
		t.Errorf("ledger journal:\n%s", journal)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "ledger", "journal", fmt.Sprint(payment)).stdout, "/api/v1/ledger/journals/{journal_id}", "GET", 200, "")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ledger", "balances", "31337"}, "ledger balances takes"},
		{[]string{"ledger", "balances", "main", signerA}, `"main" is not a chain id`},
		{[]string{"ledger", "balances", "31337", signerA, "--kind", "counterparty"}, `--kind "counterparty": want one of wallet`},
		{[]string{"ledger", "balances", "31337", signerA, "--at-block", "-1"}, "--at-block -1"},
		{[]string{"ledger", "statement", "0"}, `"0" is not a ledger account id`},
		{[]string{"ledger", "journal", "latest"}, `"latest" is not a ledger journal id`},
		{[]string{"ledger", "audit"}, `unknown command "ledger audit"`},
	} {
		if r := txctlRun(t, g.URL, g.Acme, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("txctl %s: exit %d %s, want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	// Another tenant's books are not found; a key without the scope is
	// forbidden.
	for _, args := range [][]string{{"ledger", "balances", "31337", signerA}, {"ledger", "statement", walletID}, {"ledger", "journal", fmt.Sprint(payment)}} {
		if r := txctlRun(t, g.URL, g.Globex, args...); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
			t.Errorf("globex: txctl %s: exit %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := txctlRun(t, g.URL, g.AcmeRead, "ledger", "balances", "31337", signerA); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("a tx:read key: exit %d %s", r.code, r.stderr)
	}
}

// TestLedgerTransits lists a signer's transfers between chains, by status
// and a page at a time, reads one with both ends, and refuses a bad status
// and another tenant's transfer.
func TestLedgerTransits(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true})
	bridge := common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
	end := func(chain uint64, amount int64) ledgertest.TransitEnd {
		return ledgertest.TransitEnd{ChainID: chain, Wallet: common.HexToAddress(signerA), Asset: ledger.Native, Amount: amount}
	}
	ledgertest.BookTransit(t, g.Ledger.Store, "rb-1", end(31337, 1000), end(10, 990), bridge, 2)
	ledgertest.BookTransit(t, g.Ledger.Store, "rb-2", end(31337, 500), end(10, 500), bridge, 1)

	out := mustRun(t, g.URL, g.Acme, "ledger", "transits", "31337", signerA, "--limit", "1", "--all").stdout
	rows := lines(out)
	if len(rows) != 3 || strings.Fields(rows[0])[0] != "TRANSIT_ID" || !strings.HasPrefix(rows[1], "rb-2 ") || !strings.Contains(rows[1], " open ") ||
		!strings.HasPrefix(rows[2], "rb-1 ") || !strings.Contains(rows[2], " completed ") || !strings.Contains(rows[2], " 990 ") || !strings.Contains(rows[2], " 10 ") {
		t.Errorf("ledger transits --all:\n%s", out)
	}
	if out := mustRun(t, g.URL, g.Acme, "ledger", "transits", "31337", signerA, "--status", "open").stdout; len(lines(out)) != 2 || !strings.Contains(out, "rb-2") {
		t.Errorf("ledger transits --status open:\n%s", out)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "ledger", "transits", "31337", signerA).stdout, "/api/v1/ledger/transits", "GET", 200, "")

	one := mustRun(t, g.URL, g.Acme, "ledger", "transit", "rb-1").stdout
	if field(t, one, "status") != "completed" || field(t, one, "source.amount") != "1000" || field(t, one, "destination.chain_id") != "10" ||
		field(t, one, "bridge_fee") != "10" || field(t, one, "bridge") != strings.ToLower(bridge.Hex()) {
		t.Errorf("ledger transit rb-1:\n%s", one)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "ledger", "transit", "rb-2").stdout, "/api/v1/ledger/transits/{transit_id}", "GET", 200, "")

	if r := txctlRun(t, g.URL, g.Acme, "ledger", "transits", "31337", signerA, "--status", "lost"); r.code != 2 || !strings.Contains(r.stderr, `--status "lost": want one of pending`) {
		t.Errorf("a bad status: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"ledger", "transits", "31337", signerA}, {"ledger", "transit", "rb-1"}} {
		if r := txctlRun(t, g.URL, g.Globex, args...); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
			t.Errorf("globex: txctl %s: exit %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// TestLedgerAdjustments: an operator proposes an adjustment with txctl,
// above the threshold it waits, a second admin key approves it and it is
// booked; one below the threshold books at once; the list shows both; a
// rejection, --json that follows the spec, and usage errors.
func TestLedgerAdjustments(t *testing.T) {
	t.Parallel()
	var thresholds httpapi.AdjustmentThresholds
	if err := thresholds.UnmarshalText([]byte("31337:native=100")); err != nil {
		t.Fatal(err)
	}
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true, Adjustments: httpapi.AdjustmentRules{Thresholds: thresholds}})
	g.Ledger.Book(t, ledger.Opening, "opening-a", 1,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, 10000), gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, signerA, -10000))
	g.Ledger.Book(t, ledger.Reconciliation, "reconciliation-a", 2,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, -1000), gatewaystack.Leg(ledger.Suspense, ledger.Native, signerA, 1000))
	second := g.Key(t, g.AcmeTenant, "ops-second", []gateway.Scope{gateway.ScopeAdmin}, nil)
	spender := "0x000000000000000000000000000000000005e4de"
	adjust := func(id, amount string) []string {
		return []string{"ledger", "adjust", "31337", signerA, id, "--amount", amount, "--counter", "counterparty:" + spender, "--reason", "transferFrom by a spender"}
	}

	out := mustRun(t, g.URL, g.Acme, adjust("INC-1", "-500")...).stdout
	if field(t, out, "status") != "pending_approval" || field(t, out, "needs_approval") != "true" || !strings.HasPrefix(field(t, out, "proposed_by"), "admin (") {
		t.Fatalf("ledger adjust INC-1:\n%s", out)
	}
	if r := txctlRun(t, g.URL, g.Acme, "ledger", "approve-adjustment", "INC-1"); r.code != 1 || !strings.Contains(r.stderr, "cannot approve") {
		t.Errorf("self-approval: exit %d %s", r.code, r.stderr)
	}
	out = mustRun(t, g.URL, second, "ledger", "approve-adjustment", "INC-1").stdout
	if field(t, out, "status") != "booked" || !strings.HasPrefix(field(t, out, "approved_by"), "ops-second (") || field(t, out, "journal_id") == "" {
		t.Errorf("ledger approve-adjustment INC-1:\n%s", out)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "ledger", "adjustment", "INC-1").stdout, "/api/v1/ledger/adjustments/{adjustment_id}", "GET", 200, "")
	if out := mustRun(t, g.URL, g.Acme, adjust("INC-2", "-50")...).stdout; field(t, out, "status") != "booked" {
		t.Errorf("ledger adjust INC-2, below the threshold:\n%s", out)
	}
	if out := mustRun(t, g.URL, g.Acme, adjust("INC-3", "-200")...).stdout; field(t, out, "status") != "pending_approval" {
		t.Errorf("ledger adjust INC-3:\n%s", out)
	}
	if out := mustRun(t, g.URL, g.Acme, "ledger", "reject-adjustment", "INC-3").stdout; field(t, out, "status") != "rejected" {
		t.Errorf("ledger reject-adjustment INC-3:\n%s", out)
	}
	rows := lines(mustRun(t, g.URL, g.Acme, "ledger", "adjustments", "--limit", "1", "--all").stdout)
	if len(rows) != 4 || strings.Fields(rows[0])[0] != "ADJUSTMENT_ID" || !strings.HasPrefix(rows[1], "INC-3 ") || !strings.Contains(rows[1], " rejected ") ||
		!strings.HasPrefix(rows[3], "INC-1 ") || !strings.Contains(rows[3], " ops-second ") {
		t.Errorf("ledger adjustments --all:\n%s", strings.Join(rows, "\n"))
	}
	if rows := lines(mustRun(t, g.URL, g.Acme, "ledger", "adjustments", "--status", "booked").stdout); len(rows) != 3 {
		t.Errorf("ledger adjustments --status booked:\n%s", strings.Join(rows, "\n"))
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "ledger", "adjustments").stdout, "/api/v1/ledger/adjustments", "GET", 200, "")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ledger", "adjust", "31337", signerA, "INC-9", "--counter", "counterparty:" + spender, "--reason", "x"}, "--amount is required"},
		{[]string{"ledger", "adjust", "31337", signerA, "INC-9", "--amount", "-1", "--reason", "x"}, `--counter "": want KIND:ADDRESS`},
		{[]string{"ledger", "adjust", "31337", signerA, "INC-9", "--amount", "-1", "--counter", "wallet:" + spender, "--reason", "x"}, `--counter "wallet": want one of counterparty`},
		{[]string{"ledger", "adjust", "31337", signerA, "INC-9", "--amount", "-1", "--counter", "counterparty:" + spender}, "--reason is required"},
		{[]string{"ledger", "adjustments", "--status", "lost"}, `--status "lost": want one of pending_approval`},
	} {
		if r := txctlRun(t, g.URL, g.Acme, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("txctl %s: exit %d %s, want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if r := txctlRun(t, g.URL, g.Globex, adjust("INC-9", "-1")...); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("globex adjusting acme's wallet: exit %d %s", r.code, r.stderr)
	}
}
