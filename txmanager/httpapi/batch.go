package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/txmanager"
)

// Limits of a batch of creates (openapi/txmanager.yaml, createTxBatch).
const (
	maxBatchItems = 256
	maxBatchBody  = 8 << 20
)

// createOutcome is one item's answer in a batch.
type createOutcome struct {
	Status  int           `json:"status"`
	Tx      *txJSON       `json:"tx,omitempty"`
	Problem *errs.Problem `json:"problem,omitempty"`
}

// createBatch accepts several intents, each answered as create would
// answer it alone. The gateway gathers its concurrent creates into these,
// so that thousands a second cost few round trips.
func (a *API) createBatch(w http.ResponseWriter, r *http.Request) {
	if err := httpserver.CheckJSON(r); err != nil {
		httpserver.Error(w, r, err)
		return
	}
	// Items are decoded one by one, so that a bad item fails alone.
	var body struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, maxBatchBody), &body); err != nil {
		httpserver.Error(w, r, err)
		return
	}
	if n := len(body.Items); n == 0 || n > maxBatchItems {
		httpserver.Error(w, r, errs.InvalidFields("a batch holds 1 to 256 creates",
			errs.FieldError{Pointer: "/items", Detail: fmt.Sprintf("%d items", n)}))
		return
	}
	out := make([]createOutcome, len(body.Items))
	var intents []*txmanager.Intent
	var at []int
	for i, raw := range body.Items {
		in, err := a.batchIntent(raw)
		if err != nil {
			out[i] = problemOutcome(r, err)
			continue
		}
		intents, at = append(intents, in), append(at, i)
	}
	for j, res := range a.Store.CreateMany(r.Context(), intents) {
		i := at[j]
		switch {
		case res.Err != nil:
			out[i] = problemOutcome(r, res.Err)
		case res.Created:
			out[i] = createOutcome{Status: http.StatusCreated, Tx: new(a.toTx(&res.Tx))}
		default:
			out[i] = createOutcome{Status: http.StatusOK, Tx: new(a.toTx(&res.Tx))}
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"items": out})
}

// batchIntent reads one item as create reads its body.
func (a *API) batchIntent(raw json.RawMessage) (*txmanager.Intent, error) {
	var c CreateTxRequest
	if err := httpserver.DecodeStrict(bytes.NewReader(raw), &c); err != nil {
		return nil, err
	}
	return a.intentOf(&c)
}

// problemOutcome answers an item with err's problem document.
func problemOutcome(r *http.Request, err error) createOutcome {
	p := httpserver.Problem(r, err)
	return createOutcome{Status: p.Status, Problem: &p}
}
