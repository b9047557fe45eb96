package httpapi

import (
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Operator actions on broadcast transactions: this node records the
// request; the node holding the signer's lease carries it out and records
// the outcome (postgres.Store.RequestAction, FinishAction).

// ActionRequest is the body of an operator action.
type ActionRequest struct {
	Action   string `json:"action"`
	Operator string `json:"operator"`
}

// check names every problem of the request.
func (b *ActionRequest) check() error {
	var problems []string
	switch b.Action {
	case postgres.ActionResend, postgres.ActionBump, postgres.ActionCancel:
	default:
		problems = append(problems, "action: one of resend, bump, cancel")
	}
	if n := utf8.RuneCountInString(b.Operator); n < 1 || n > 255 {
		problems = append(problems, "operator: 1 to 255 characters")
	} else if strings.ContainsFunc(b.Operator, unicode.IsControl) {
		// It goes to logs and to PostgreSQL, which refuses a NUL.
		problems = append(problems, "operator: no control characters")
	}
	if len(problems) > 0 {
		return errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	return nil
}

func (a *API) requestAction(w http.ResponseWriter, r *http.Request) {
	id, err := txIDParam(r)
	var body ActionRequest
	if err == nil {
		err = decodeBody(w, r, &body)
	}
	if err == nil {
		err = body.check()
	}
	if err == nil && body.Action == postgres.ActionCancel {
		err = a.cancelsAllowed(r, id)
	}
	if err != nil {
		httpserver.Error(w, r, err)
		return
	}
	act, err := a.Store.RequestAction(r.Context(), id, body.Action, body.Operator)
	if err != nil {
		httpserver.Error(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusAccepted, toAction(&act))
}

// cancelsAllowed answers errs.Conflict, at once, when the transaction's
// signer is not configured for cancels: its owner would only refuse.
func (a *API) cancelsAllowed(r *http.Request, id uuid.UUID) error {
	tx, err := a.Store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	key := txmanager.SignerKey{ChainID: tx.ChainID, Signer: tx.From}
	cfg, ok := a.Chains.Signer(key)
	if !ok {
		return errs.Errorf(errs.Conflict, "signer %s on chain %d is not configured: cancels are off", key.Signer.Hex(), key.ChainID)
	}
	if !cfg.Cancels {
		return errs.Errorf(errs.Conflict, `cancels are off for signer %s on chain %d (chains file: "cancels": true)`, key.Signer.Hex(), key.ChainID)
	}
	return nil
}

func (a *API) listActions(w http.ResponseWriter, r *http.Request) {
	id, err := txIDParam(r)
	if err == nil {
		// An unknown transaction is a 404, not an empty list.
		_, err = a.Store.Get(r.Context(), id)
	}
	var acts []postgres.Action
	if err == nil {
		acts, err = a.Store.Actions(r.Context(), id)
	}
	if err != nil {
		httpserver.Error(w, r, err)
		return
	}
	out := make([]actionJSON, len(acts))
	for i := range acts {
		out[i] = toAction(&acts[i])
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"actions": out})
}

type actionJSON struct {
	ActionID    uuid.UUID  `json:"action_id"`
	TxID        uuid.UUID  `json:"tx_id"`
	Action      string     `json:"action"`
	Operator    string     `json:"operator"`
	RequestedAt time.Time  `json:"requested_at"`
	DoneAt      *time.Time `json:"done_at,omitempty"`
	Outcome     string     `json:"outcome,omitempty"`
	Detail      string     `json:"detail,omitempty"`
	Attempt     *int       `json:"attempt,omitempty"`
}

func toAction(act *postgres.Action) actionJSON {
	out := actionJSON{ActionID: act.ID, TxID: act.TxID, Action: act.Action, Operator: act.Operator,
		RequestedAt: act.RequestedAt.UTC(), Outcome: act.Outcome, Detail: act.Detail, Attempt: act.Attempt}
	if act.DoneAt != nil {
		at := act.DoneAt.UTC()
		out.DoneAt = &at
	}
	return out
}
