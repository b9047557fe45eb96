package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
func (a *API) createBatch(w http.ResponseWriter, r *http.Request) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	items, decodeErrs, err := decodeBatch(http.MaxBytesReader(w, r.Body, maxBatchBody))
	if err != nil {
		return err
	}
	out := make([]createOutcome, len(items))
	var intents []*txmanager.Intent
	var at []int
	for i := range items {
		err := decodeErrs[i]
		if err == nil {
			var in *txmanager.Intent
			if in, err = a.intentOf(&items[i]); err == nil {
				intents, at = append(intents, in), append(at, i)
				continue
			}
		}
		out[i] = problemOutcome(r, err)
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
	return nil
}

// decodeBatch reads a batch's items, each as create reads its body:
// decodeErrs[i] is item i's decoding error, and the error is the batch's
// own (not JSON, no items, too many). The whole batch is decoded at once;
// only when that fails are the items decoded one by one, to find which.
func decodeBatch(body io.Reader) (items []CreateTxRequest, decodeErrs []error, err error) {
	raw, err := httpserver.ReadAll(body)
	if err != nil {
		return nil, nil, err
	}
	var whole struct {
		Items []CreateTxRequest `json:"items"`
	}
	if httpserver.DecodeStrict(bytes.NewReader(raw), &whole) == nil {
		items, decodeErrs = whole.Items, make([]error, len(whole.Items))
	} else {
		var each struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := httpserver.DecodeStrict(bytes.NewReader(raw), &each); err != nil {
			return nil, nil, err
		}
		items, decodeErrs = make([]CreateTxRequest, len(each.Items)), make([]error, len(each.Items))
		for i, item := range each.Items {
			decodeErrs[i] = httpserver.DecodeStrict(bytes.NewReader(item), &items[i])
		}
	}
	if n := len(items); n == 0 || n > maxBatchItems {
		return nil, nil, errs.InvalidFields("a batch holds 1 to 256 creates",
			errs.FieldError{Pointer: "/items", Detail: fmt.Sprintf("%d items", n)})
	}
	return items, decodeErrs, nil
}

// problemOutcome answers an item with err's problem document.
func problemOutcome(r *http.Request, err error) createOutcome {
	p := httpserver.Problem(r, err)
	return createOutcome{Status: p.Status, Problem: &p}
}
