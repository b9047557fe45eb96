package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// Reconciler runs a reconciliation on demand (ledger/reconcile).
type Reconciler interface {
	Reconcile(ctx context.Context, chainID uint64, trigger string) (*ledger.ReconciliationRun, error)
}

// maxReconcileBody bounds createReconciliation's body: one chain id.
const maxReconcileBody = 4 << 10

func (a *API) createReconciliation(w http.ResponseWriter, r *http.Request) error {
	if a.reconciler == nil {
		return errs.E(errs.Unavailable, "reconciliation is not running in this ledgerd")
	}
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	var req struct {
		ChainID *uint64 `json:"chain_id"`
	}
	if err := httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, maxReconcileBody), &req); err != nil {
		return err
	}
	if req.ChainID == nil || *req.ChainID == 0 || *req.ChainID > maxInt64 {
		detail := fmt.Sprintf("a chain id from 1 to %d", uint64(maxInt64))
		return errs.InvalidFields("chain_id: "+detail, errs.FieldError{Pointer: "/chain_id", Detail: detail})
	}
	run, err := a.reconciler.Reconcile(r.Context(), *req.ChainID, ledger.TriggerRequest)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusCreated, toRun(run, true))
	return nil
}

func (a *API) listReconciliations(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	chainID := p.chainID()
	// Newest first: the cursor's id is the last run shown, and the next
	// page holds older ones.
	return writeIDPage(a, w, r, p, idList[ledger.ReconciliationRun, runJSON]{kind: reconciliationsCursor, scope: fmt.Sprintf("chain_id=%d", chainID), name: "runs",
		read: func(before int64, limit int) ([]ledger.ReconciliationRun, error) {
			return a.store.ReconciliationRuns(r.Context(), chainID, before, limit)
		},
		id:    func(v *ledger.ReconciliationRun) int64 { return v.ID },
		shape: func(v *ledger.ReconciliationRun) runJSON { return toRun(v, false) }})
}

func (a *API) getReconciliation(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	id := p.id("run_id", chi.URLParam(r, "run_id"))
	if err := p.err(); err != nil {
		return err
	}
	run, err := a.store.ReconciliationRun(r.Context(), id)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toRun(run, true))
	return nil
}

// runJSON is a ReconciliationRun in openapi/ledger.yaml's shape.
type runJSON struct {
	ID          int64      `json:"run_id"`
	ChainID     uint64     `json:"chain_id"`
	BlockNumber uint64     `json:"block_number"`
	BlockHash   string     `json:"block_hash"`
	Trigger     string     `json:"trigger"`
	Status      string     `json:"status"`
	Problem     string     `json:"problem"`
	Differences int        `json:"differences"`
	Deferred    int        `json:"deferred"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  time.Time  `json:"finished_at"`
	Items       []itemJSON `json:"items,omitempty"`
}

type itemJSON struct {
	Address    string   `json:"address"`
	Asset      string   `json:"asset"`
	Ledger     string   `json:"ledger_balance"`
	Chain      *string  `json:"chain_balance"`
	Difference *string  `json:"difference"`
	Cause      string   `json:"cause"`
	JournalID  *int64   `json:"journal_id"`
	Pending    []string `json:"pending"`
	Negative   bool     `json:"negative"`
}

// toRun shapes run, with its items when withItems (an empty list then
// says the chain had no wallet to compare).
func toRun(run *ledger.ReconciliationRun, withItems bool) runJSON {
	out := runJSON{ID: run.ID, ChainID: run.ChainID, BlockNumber: run.Block.Number, BlockHash: lowerHex(run.Block.Hash.Bytes()),
		Trigger: run.Trigger, Status: run.Status, Problem: run.Problem, Differences: run.Differences, Deferred: run.Deferred,
		StartedAt: run.StartedAt.UTC(), FinishedAt: run.FinishedAt.UTC()}
	if !withItems {
		return out
	}
	out.Items = make([]itemJSON, len(run.Items))
	for i, it := range run.Items {
		j := itemJSON{Address: lowerHex(it.Address.Bytes()), Asset: it.Asset, Ledger: it.Ledger.String(), Cause: it.Cause,
			Pending: hashesJSON(it.Pending), Negative: it.Negative}
		if it.Chain != nil {
			j.Chain = new(it.Chain.String())
		}
		if it.Difference != nil {
			j.Difference = new(it.Difference.String())
		}
		if it.JournalID != 0 {
			j.JournalID = new(it.JournalID)
		}
		out.Items[i] = j
	}
	return out
}

func hashesJSON(hs []common.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = lowerHex(h.Bytes())
	}
	return out
}
