package httpapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/openapi/ledgerapi"
)

const chainB = 10

var (
	walletB = common.HexToAddress("0x00000000000000000000000000000000000000bb")
	bridge  = common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
)

// seedTransits books three transits, oldest first: rb-1 completed from
// hot on chain to walletB on chainB (1000 sent, 990 arrived), rb-2 open
// the other way, rb-3 pending from bob on chain 99.
func seedTransits(t *testing.T, a *api) {
	t.Helper()
	ledgertest.BookTransit(t, a.store, "rb-1", ledgertest.TransitEnd{ChainID: chain, Wallet: hot, Asset: token, Amount: 1000},
		ledgertest.TransitEnd{ChainID: chainB, Wallet: walletB, Asset: ledger.Native, Amount: 990}, bridge, 2)
	ledgertest.BookTransit(t, a.store, "rb-2", ledgertest.TransitEnd{ChainID: chainB, Wallet: walletB, Asset: ledger.Native, Amount: 500},
		ledgertest.TransitEnd{ChainID: chain, Wallet: hot, Asset: ledger.Native, Amount: 500}, bridge, 1)
	ledgertest.BookTransit(t, a.store, "rb-3", ledgertest.TransitEnd{ChainID: 99, Wallet: bob, Asset: ledger.Native, Amount: 7},
		ledgertest.TransitEnd{ChainID: chain, Wallet: bob, Asset: ledger.Native, Amount: 7}, bridge, 0)
}

// Transits list newest first, filtered by status, chain and wallet at
// either end, a page at a time; one reads with both ends and the fee.
func TestTransits(t *testing.T) {
	t.Parallel()
	a := start(t)
	seedTransits(t, a)
	ids := func(path string) []string {
		t.Helper()
		return ledgertest.WalkPages(t, path, func(path string) ([]string, *string) {
			page := read[ledgerapi.TransitList](t, a, path)
			var ids []string
			for _, tr := range page.Transits {
				ids = append(ids, tr.TransitId)
			}
			return ids, page.NextCursor
		})
	}
	hotHex := strings.ToLower(hot.Hex())
	for q, want := range map[string][]string{
		"":                                   {"rb-3", "rb-2", "rb-1"},
		"status=completed":                   {"rb-1"},
		"status=open":                        {"rb-2"},
		"status=pending":                     {"rb-3"},
		"chain_id=99":                        {"rb-3"},
		"chain_id=10":                        {"rb-2", "rb-1"},
		"address=" + hot.Hex():               {"rb-2", "rb-1"}, // any letter case
		"address=" + hotHex:                  {"rb-2", "rb-1"},
		"address=" + hotHex + "&chain_id=99": nil,
		"address=" + strings.ToLower(walletB.Hex()) + "&chain_id=10&status=open": {"rb-2"},
	} {
		// limit=1 walks the list a page at a time.
		if got := ids("/v1/transits?limit=1&" + q); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", q, got, want)
		}
	}

	done := read[ledgerapi.Transit](t, a, "/v1/transits/rb-1")
	src, dst := done.Source, done.Destination
	if done.Status != "completed" || dst == nil || src.ChainId != chain || src.Wallet != hotHex || *src.Asset != token || *src.Amount != "1000" ||
		src.JournalId == nil || src.TxHash == nil || src.BlockHash == nil || dst.ChainId != chainB || *dst.Amount != "990" || *dst.Asset != ledger.Native ||
		*done.Bridge != strings.ToLower(bridge.Hex()) || *done.BridgeFee != "10" || done.FeeJournalId == nil || done.OpenedAt == nil || done.CompletedAt == nil {
		t.Errorf("rb-1: %+v (source %+v, destination %+v)", done, src, dst)
	}
	// The journals it names are the ones that booked it.
	fee := read[ledgerapi.Journal](t, a, fmt.Sprintf("/v1/journals/%d", *done.FeeJournalId))
	if !slices.ContainsFunc(fee.Entries, func(e ledgerapi.JournalEntry) bool {
		return e.Account.Kind == "fee_expense" && e.Account.Address == *done.Bridge && e.Amount == "10"
	}) {
		t.Errorf("the fee journal: %+v", fee)
	}
	if j := read[ledgerapi.Journal](t, a, fmt.Sprintf("/v1/journals/%d", *dst.JournalId)); j.Kind != "transit_in" || j.ChainId != chainB {
		t.Errorf("the destination's journal: %+v", j)
	}
	open := read[ledgerapi.Transit](t, a, "/v1/transits/rb-2")
	if open.Status != "open" || open.Source.JournalId == nil || open.Destination.JournalId != nil || open.Destination.Amount != nil ||
		open.BridgeFee != nil || open.CompletedAt != nil {
		t.Errorf("rb-2: %+v", open)
	}
	pending := read[ledgerapi.Transit](t, a, "/v1/transits/rb-3")
	if pending.Status != "pending" || pending.Source.JournalId != nil || pending.Bridge != nil || pending.OpenedAt != nil {
		t.Errorf("rb-3: %+v", pending)
	}
}

func TestTransitBadInputIsAProblem(t *testing.T) {
	t.Parallel()
	a := start(t)
	seedTransits(t, a)
	transits := read[ledgerapi.TransitList](t, a, "/v1/transits?limit=1")
	journals := read[ledgerapi.JournalList](t, a, "/v1/journals?limit=1")
	if transits.NextCursor == nil || journals.NextCursor == nil {
		t.Fatal("no cursors to spoil")
	}
	next := url.QueryEscape(*transits.NextCursor)
	requireProblems(t, a, []problemCase{
		{"/v1/transits?status=lost", 400, []string{"status"}},
		{"/v1/transits?status=OPEN", 400, []string{"status"}},
		{"/v1/transits?status=", 400, []string{"status"}},
		{"/v1/transits?chain_id=0", 400, []string{"chain_id"}},
		{"/v1/transits?address=0x12", 400, []string{"address"}},
		{"/v1/transits?limit=0&status=x&chain_id=-1", 400, []string{"chain_id", "limit", "status"}},
		{"/v1/transits?limit=1&cursor=" + tamper(*transits.NextCursor), 400, []string{"cursor"}},
		{"/v1/transits?limit=1&status=open&cursor=" + next, 400, []string{"cursor"}}, // another list's filters
		{"/v1/transits?limit=1&cursor=" + url.QueryEscape(*journals.NextCursor), 400, []string{"cursor"}},
		{"/v1/journals?limit=1&cursor=" + next, 400, []string{"cursor"}},
		{"/v1/transits/rb-9", 404, nil},
		{"/v1/transits/no%20spaces", 400, []string{"transit_id"}},
		{"/v1/transits/" + strings.Repeat("a", ledger.MaxTransitIDLen+1), 400, []string{"transit_id"}},
		{"/v1/transits/%C3%A9", 400, []string{"transit_id"}},
	})
}
