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
)

// Operator actions on transactions that do not move (ALLOCATED, SIGNED,
// BROADCASTED and not mined): this node records the request; the node
// holding the signer's lease carries it out and records the outcome
// (txmanager.APIStore.Request, then the owner's FinishAction).

// ActionRequest is the body of an operator action.
type ActionRequest struct {
	Action   string `json:"action"`
	Operator string `json:"operator"`
	// ActionID, a UUID, makes the request idempotent.
	ActionID *string `json:"action_id"`
}

// check names every problem of the request, and returns its action id.
func (b *ActionRequest) check() (*uuid.UUID, error) {
	var problems []string
	var fields []errs.FieldError
	switch b.Action {
	case txmanager.ActionResend, txmanager.ActionBump, txmanager.ActionCancel, txmanager.ActionAbandon:
	default:
		problems = append(problems, "action: one of resend, bump, cancel, abandon")
		fields = append(fields, errs.FieldError{Pointer: "/action", Detail: "one of resend, bump, cancel, abandon"})
	}
	if n := utf8.RuneCountInString(b.Operator); n < 1 || n > 255 {
		problems = append(problems, "operator: 1 to 255 characters")
		fields = append(fields, errs.FieldError{Pointer: "/operator", Detail: "1 to 255 characters"})
	} else if strings.ContainsFunc(b.Operator, unicode.IsControl) {
		// It goes to logs and to PostgreSQL, which refuses a NUL.
		problems = append(problems, "operator: no control characters")
		fields = append(fields, errs.FieldError{Pointer: "/operator", Detail: "no control characters"})
	}
	var id *uuid.UUID
	if b.ActionID != nil {
		// Only the canonical form, so that one id is one string.
		parsed, err := uuid.Parse(*b.ActionID)
		if err != nil || parsed.String() != *b.ActionID {
			problems = append(problems, "action_id: a UUID in its canonical lowercase form")
			fields = append(fields, errs.FieldError{Pointer: "/action_id", Detail: "a UUID in its canonical lowercase form"})
		} else {
			id = &parsed
		}
	}
	if len(problems) > 0 {
		return nil, errs.InvalidFields(strings.Join(problems, "; "), fields...)
	}
	return id, nil
}

// requestAction records an action: 202 with it when it is new, 200 with
// the action recorded before when the request repeats one (the same
// action_id, or without one the same request still waiting).
func (a *API) requestAction(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	var body ActionRequest
	if err == nil {
		err = decodeBody(w, r, &body)
	}
	var actionID *uuid.UUID
	if err == nil {
		actionID, err = body.check()
	}
	req := txmanager.ActionRequest{TxID: id, Action: body.Action, Operator: body.Operator, ActionID: actionID}
	replay := false
	if err == nil {
		replay, err = a.replayed(r, req)
	}
	if err == nil && !replay {
		err = a.cancelsAllowed(r, req)
	}
	if err != nil {
		return err
	}
	act, fresh, err := a.Store.Request(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if fresh {
		status = http.StatusAccepted
	}
	httpserver.WriteJSON(w, status, toAction(&act))
	return nil
}

// replayed tells whether req names an action id already recorded: the
// store answers it, whatever the transaction's state or the signer's
// settings are now.
func (a *API) replayed(r *http.Request, req txmanager.ActionRequest) (bool, error) {
	if req.ActionID == nil {
		return false, nil
	}
	_, err := a.Store.ActionByID(r.Context(), *req.ActionID)
	if errs.Is(err, errs.NotFound) {
		return false, nil
	}
	return err == nil, err
}

// cancelsAllowed answers errs.Conflict, at once, when the request is a
// cancel, or the abandon of a SIGNED transaction (whose filler replaces
// it: a cancel to signerd and the nodes), and the transaction's signer is
// not configured for cancels: its owner would only refuse.
func (a *API) cancelsAllowed(r *http.Request, req txmanager.ActionRequest) error {
	if req.Action != txmanager.ActionCancel && req.Action != txmanager.ActionAbandon {
		return nil
	}
	tx, err := a.Store.Get(r.Context(), req.TxID)
	if err != nil {
		return err
	}
	if req.Action == txmanager.ActionAbandon && tx.State != txmanager.StateSigned {
		return nil
	}
	key := txmanager.SignerKey{ChainID: tx.ChainID, Signer: tx.From}
	cfg, ok := a.Chains.Signer(key)
	if !ok {
		return errs.Errorf(errs.Conflict, "signer %s on chain %d is not configured: cancels are off", key.Signer.Hex(), key.ChainID)
	}
	if !cfg.Cancels {
		why := ""
		if req.Action == txmanager.ActionAbandon {
			why = "a SIGNED transaction is abandoned by a transfer that replaces it at its nonce, a cancel: "
		}
		return errs.Errorf(errs.Conflict, `%scancels are off for signer %s on chain %d (chains file: "cancels": true)`, why, key.Signer.Hex(), key.ChainID)
	}
	return nil
}

func (a *API) listActions(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	if err == nil {
		// An unknown transaction is a 404, not an empty list.
		_, err = a.Store.Get(r.Context(), id)
	}
	var acts []txmanager.Action
	if err == nil {
		acts, err = a.Store.Actions(r.Context(), id)
	}
	if err != nil {
		return err
	}
	out := make([]actionJSON, len(acts))
	for i := range acts {
		out[i] = toAction(&acts[i])
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"actions": out})
	return nil
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
	FillerTxID  *uuid.UUID `json:"filler_tx_id,omitempty"`
}

func toAction(act *txmanager.Action) actionJSON {
	out := actionJSON{ActionID: act.ID, TxID: act.TxID, Action: act.Action, Operator: act.Operator,
		RequestedAt: act.RequestedAt.UTC(), Outcome: act.Outcome, Detail: act.Detail, Attempt: act.Attempt, FillerTxID: act.Filler}
	if act.DoneAt != nil {
		at := act.DoneAt.UTC()
		out.DoneAt = &at
	}
	return out
}
