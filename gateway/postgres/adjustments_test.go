package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/errs"
)

// adjustmentRig is a store with tenant acme owning signer A, and two of
// its admin keys.
type adjustmentRig struct {
	s          *postgres.Store
	tenant     uuid.UUID
	alice, bob gateway.KeyRef
}

func newAdjustmentRig(t *testing.T) *adjustmentRig {
	t.Helper()
	ctx := context.Background()
	s := newStore(t)
	acme, err := s.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AssignSigner(ctx, acme.ID, signerA); err != nil {
		t.Fatal(err)
	}
	r := &adjustmentRig{s: s, tenant: acme.ID}
	for _, ref := range []*gateway.KeyRef{&r.alice, &r.bob} {
		name := map[*gateway.KeyRef]string{&r.alice: "ops-alice", &r.bob: "ops-bob"}[ref]
		k, _, err := s.CreateKey(ctx, gateway.NewKey{Tenant: acme.ID, Name: name, Scopes: []gateway.Scope{gateway.ScopeAdmin}})
		if err != nil {
			t.Fatal(err)
		}
		*ref = gateway.KeyRef{ID: k.ID, Name: k.Name}
	}
	return r
}

func (r *adjustmentRig) proposal(id string, amount int64) gateway.NewAdjustment {
	return gateway.NewAdjustment{Tenant: r.tenant, ID: id, ChainID: signerA.ChainID, Wallet: signerA.Address, Asset: "native",
		Amount: big.NewInt(amount), CounterKind: "deposit_source", CounterAddress: common.HexToAddress("0x5ea4e0"),
		Reason: "internal transfer from the staking contract", ProposedBy: r.alice}
}

// An adjustment above the threshold waits for a second key, and so does
// one that the adjustments booked without one in the window would take
// past it, however the proposals race: what one key books alone is
// bounded over the window, not only per adjustment.
func TestAdjustmentsAboveTheThresholdWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newAdjustmentRig(t)
	rule := gateway.ApprovalRule{Threshold: big.NewInt(1000), Window: 24 * time.Hour, TTL: time.Hour}
	status := func(id string, amount int64) string {
		t.Helper()
		a, created, err := r.s.ProposeAdjustment(ctx, r.proposal(id, amount), rule)
		if err != nil || !created {
			t.Fatalf("propose %s: created=%v %v", id, created, err)
		}
		return a.Status
	}
	if got := status("at", -1000); got != gateway.AdjustmentApproved {
		t.Errorf("at the threshold: %s", got)
	}
	if got := status("above", 1001); got != gateway.AdjustmentPending {
		t.Errorf("above the threshold: %s", got)
	}
	// The window holds 1000 booked alone: one more unit waits.
	if got := status("more", 1); got != gateway.AdjustmentPending {
		t.Errorf("past the window's threshold: %s", got)
	}
	// Without a threshold for the asset, every amount waits.
	if a, _, err := r.s.ProposeAdjustment(ctx, r.proposal("unlisted", 1), gateway.ApprovalRule{Window: time.Hour, TTL: time.Hour}); err != nil ||
		a.Status != gateway.AdjustmentPending || a.Threshold != nil {
		t.Errorf("no threshold: %+v %v", a, err)
	}

	// Ten proposals of 100 race on a fresh wallet's window of 500: five
	// go alone, five wait.
	race := newAdjustmentRig(t)
	rule.Threshold = big.NewInt(500)
	var wg sync.WaitGroup
	got := make([]string, 10)
	for i := range got {
		wg.Go(func() {
			a, _, err := race.s.ProposeAdjustment(ctx, race.proposal(fmt.Sprint("race-", i), 100), rule)
			if err != nil {
				t.Error(err)
			}
			got[i] = a.Status
		})
	}
	wg.Wait()
	alone := 0
	for _, s := range got {
		if s == gateway.AdjustmentApproved {
			alone++
		}
	}
	if alone != 5 {
		t.Errorf("racing proposals: %v, want five approved alone", got)
	}
}

// A proposal is idempotent by its id; a second key approves a pending
// one, never the key that proposed it, and only while it is pending and
// unexpired; a rejection ends it; the ledger's answer settles an
// approved one once.
func TestAnAdjustmentsLife(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newAdjustmentRig(t)
	rule := gateway.ApprovalRule{Threshold: big.NewInt(10), Window: time.Hour, TTL: time.Hour}
	p := r.proposal("INC-1", 500)
	first, created, err := r.s.ProposeAdjustment(ctx, p, rule)
	if err != nil || !created || first.Status != gateway.AdjustmentPending || !first.NeedsApproval || first.ExpiresAt == nil ||
		first.Threshold.Int64() != 10 || first.ProposedBy != r.alice {
		t.Fatalf("propose: %+v created=%v %v", first, created, err)
	}
	// The same proposal again, even from another key: the stored one.
	again := p
	again.ProposedBy = r.bob
	if a, created, err := r.s.ProposeAdjustment(ctx, again, rule); err != nil || created || a.Seq != first.Seq || a.ProposedBy != r.alice {
		t.Errorf("replay: %+v created=%v %v", a, created, err)
	}
	other := p
	other.Amount = big.NewInt(501)
	if _, _, err := r.s.ProposeAdjustment(ctx, other, rule); !errs.Is(err, errs.Conflict) {
		t.Errorf("another proposal under the id: %v, want a conflict", err)
	}
	if _, err := r.s.ApproveAdjustment(ctx, r.tenant, "INC-1", r.alice); !errs.Is(err, errs.Forbidden) {
		t.Errorf("self-approval: %v, want forbidden", err)
	}
	approved, err := r.s.ApproveAdjustment(ctx, r.tenant, "INC-1", r.bob)
	if err != nil || approved.Status != gateway.AdjustmentApproved || approved.ApprovedBy == nil || *approved.ApprovedBy != r.bob {
		t.Fatalf("approve: %+v %v", approved, err)
	}
	// Approved and not booked yet (the ledger did not answer): approving
	// again answers it for the booking to be tried again.
	if a, err := r.s.ApproveAdjustment(ctx, r.tenant, "INC-1", r.alice); err != nil || a.Status != gateway.AdjustmentApproved || *a.ApprovedBy != r.bob {
		t.Errorf("approved again: %+v %v", a, err)
	}
	booked, err := r.s.AdjustmentBooked(ctx, r.tenant, "INC-1", 42)
	if err != nil || booked.Status != gateway.AdjustmentBooked || *booked.JournalID != 42 {
		t.Fatalf("booked: %+v %v", booked, err)
	}
	if _, err := r.s.AdjustmentBooked(ctx, r.tenant, "INC-1", 42); err != nil {
		t.Errorf("booked again: %v", err)
	}
	if _, err := r.s.AdjustmentBooked(ctx, r.tenant, "INC-1", 43); err == nil {
		t.Error("booked again as another journal")
	}
	for name, err := range map[string]error{
		"approve a booked one": second(r.s.ApproveAdjustment(ctx, r.tenant, "INC-1", r.bob)),
		"reject a booked one":  second(r.s.RejectAdjustment(ctx, r.tenant, "INC-1", r.bob)),
	} {
		if !errs.Is(err, errs.Conflict) {
			t.Errorf("%s: %v, want a conflict", name, err)
		}
	}

	// Rejected: ended, by any key of the tenant (its proposer withdraws).
	if _, _, err := r.s.ProposeAdjustment(ctx, r.proposal("INC-2", 500), rule); err != nil {
		t.Fatal(err)
	}
	if a, err := r.s.RejectAdjustment(ctx, r.tenant, "INC-2", r.alice); err != nil || a.Status != gateway.AdjustmentRejected || *a.RejectedBy != r.alice {
		t.Errorf("reject: %+v %v", a, err)
	}
	if _, err := r.s.ApproveAdjustment(ctx, r.tenant, "INC-2", r.bob); !errs.Is(err, errs.Conflict) {
		t.Errorf("approve a rejected one: %v", err)
	}

	// Expired: past its TTL it reads so and cannot be approved.
	if _, _, err := r.s.ProposeAdjustment(ctx, r.proposal("INC-3", 500), gateway.ApprovalRule{Threshold: big.NewInt(10), Window: time.Hour, TTL: time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	if a, err := r.s.ApproveAdjustment(ctx, r.tenant, "INC-3", r.bob); !errs.Is(err, errs.Conflict) || a.Status != gateway.AdjustmentExpired {
		t.Errorf("approve an expired one: %+v %v", a, err)
	}

	// Refused by the ledger: recorded with why.
	if _, _, err := r.s.ProposeAdjustment(ctx, r.proposal("INC-4", 5), rule); err != nil {
		t.Fatal(err)
	}
	if a, err := r.s.AdjustmentRefused(ctx, r.tenant, "INC-4", errs.Conflict, "suspense holds 3"); err != nil ||
		a.Status != gateway.AdjustmentRefused || a.RefusalKind != "conflict" || a.Refusal != "suspense holds 3" {
		t.Errorf("refused: %+v %v", a, err)
	}

	list := func(status string) []string {
		t.Helper()
		as, err := r.s.Adjustments(ctx, r.tenant, gateway.AdjustmentFilter{Status: status, Signers: []gateway.SignerRef{signerA}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range as {
			ids = append(ids, a.ID)
		}
		return ids
	}
	for status, want := range map[string]string{"": "[INC-4 INC-3 INC-2 INC-1]", gateway.AdjustmentExpired: "[INC-3]",
		gateway.AdjustmentPending: "[]", gateway.AdjustmentBooked: "[INC-1]", gateway.AdjustmentRefused: "[INC-4]"} {
		if got := fmt.Sprint(list(status)); got != want {
			t.Errorf("status %q: %s, want %s", status, got, want)
		}
	}
	if as, err := r.s.Adjustments(ctx, r.tenant, gateway.AdjustmentFilter{Signers: []gateway.SignerRef{signerB}, Limit: 10}); err != nil || len(as) != 0 {
		t.Errorf("another signer's: %+v %v", as, err)
	}
	if _, err := r.s.Adjustment(ctx, uuid.New(), "INC-1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("another tenant's: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestAdjustmentListsFilterAndPage: each status filter of a tenant's list,
// pending and expired apart though one stored status, alone and with the
// page cursor (Before), and paging through the whole list in pages of two.
func TestAdjustmentListsFilterAndPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newAdjustmentRig(t)
	rule := gateway.ApprovalRule{Threshold: big.NewInt(10), Window: time.Hour, TTL: time.Hour}
	expiring := gateway.ApprovalRule{Threshold: big.NewInt(10), Window: time.Hour, TTL: time.Microsecond}
	seqs := map[string]int64{}
	for _, p := range []struct {
		id     string
		amount int64
		rule   gateway.ApprovalRule
	}{
		{"P-1", 500, rule}, {"X-1", 500, expiring}, {"A-1", 5, rule}, {"P-2", 500, rule}, {"X-2", 500, expiring}, {"A-2", 1, rule},
	} {
		a, _, err := r.s.ProposeAdjustment(ctx, r.proposal(p.id, p.amount), p.rule)
		if err != nil {
			t.Fatal(err)
		}
		seqs[p.id] = a.Seq
	}
	list := func(status string, before int64, limit int) ([]string, int64) {
		t.Helper()
		as, err := r.s.Adjustments(ctx, r.tenant, gateway.AdjustmentFilter{Status: status, Signers: []gateway.SignerRef{signerA}, Before: before, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		var last int64
		for _, a := range as {
			ids, last = append(ids, a.ID), a.Seq
		}
		return ids, last
	}
	for _, c := range []struct {
		status string
		before string // the page starts below this one's seq; "": the newest
		want   string
	}{
		{"", "", "[A-2 X-2 P-2 A-1 X-1 P-1]"},
		{gateway.AdjustmentPending, "", "[P-2 P-1]"},
		{gateway.AdjustmentExpired, "", "[X-2 X-1]"},
		{gateway.AdjustmentApproved, "", "[A-2 A-1]"},
		{gateway.AdjustmentBooked, "", "[]"},
		{"", "P-2", "[A-1 X-1 P-1]"},
		{gateway.AdjustmentPending, "P-2", "[P-1]"},
		{gateway.AdjustmentExpired, "X-2", "[X-1]"},
		{gateway.AdjustmentApproved, "A-1", "[]"},
	} {
		if got, _ := list(c.status, seqs[c.before], 10); fmt.Sprint(got) != c.want {
			t.Errorf("status %q below %q: %v, want %s", c.status, c.before, got, c.want)
		}
	}
	var all []string
	for before, pages := int64(0), 0; pages < 10; pages++ {
		page, last := list("", before, 2)
		if len(page) == 0 {
			break
		}
		all, before = append(all, page...), last
	}
	if got, want := fmt.Sprint(all), "[A-2 X-2 P-2 A-1 X-1 P-1]"; got != want {
		t.Errorf("pages of two: %s, want %s", got, want)
	}
}
