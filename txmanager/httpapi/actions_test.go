package httpapi_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// actionRig is the API checked against txmanager.yaml, with two signers on
// chain 31337: signer, whose cancels are off (the default), and another,
// whose cancels are on; and the store, holding both signers' leases as
// their owner node would, to move transactions along.
type actionRig struct {
	*api
	store  *postgres.Store
	fences map[common.Address]txmanager.Fence
	nonces map[common.Address]uint64
}

func startActions(t *testing.T) *actionRig {
	t.Helper()
	a := startServer(t, true, `[{"address": "`+signer+`"}, {"address": "`+another+`", "cancels": true}]`)
	r := &actionRig{api: a, store: postgres.New(a.Pool), fences: map[common.Address]txmanager.Fence{}, nonces: map[common.Address]uint64{}}
	for _, s := range []string{signer, another} {
		key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(s)}
		token, ok, err := r.store.Acquire(context.Background(), "node-a", key, time.Hour)
		if err != nil || !ok {
			t.Fatalf("acquire %s: %v %v", key, ok, err)
		}
		r.fences[key.Signer] = txmanager.Fence{Node: "node-a", Key: key, Token: token}
	}
	return r
}

// created accepts a transfer from from: an INIT transaction.
func (r *actionRig) created(t *testing.T, from, requestID string) uuid.UUID {
	t.Helper()
	to := common.HexToAddress(bob)
	tx, _, err := r.store.Create(context.Background(), &txmanager.Intent{ChainID: 31337, From: common.HexToAddress(from),
		RequestID: requestID, To: &to, Value: big.NewInt(1), Data: []byte{}, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	return tx.ID
}

// broadcast writes what the owner's worker writes for a transfer it sent:
// INIT through ALLOCATED at the signer's next nonce, the signed attempt,
// BROADCASTED.
func (r *actionRig) broadcast(t *testing.T, from, requestID string) uuid.UUID {
	t.Helper()
	id := r.signed(t, from, requestID)
	if _, err := r.store.Broadcasted(context.Background(), r.fences[common.HexToAddress(from)], []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return id
}

// signed writes a transfer up to SIGNED, as broadcast does.
func (r *actionRig) signed(t *testing.T, from, requestID string) uuid.UUID {
	t.Helper()
	id := r.allocated(t, from, requestID)
	fees := txmanager.Fees{MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
	if _, err := r.store.Signed(context.Background(), r.fences[common.HexToAddress(from)], []txmanager.Attempt{{TxID: id, Raw: id[:], Hash: crypto.Keccak256Hash(id[:]),
		MaxFeePerGas: fees.MaxFeePerGas, MaxPriorityFeePerGas: fees.MaxPriorityFeePerGas}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// allocated writes a transfer up to ALLOCATED at the signer's next nonce,
// as broadcast does.
func (r *actionRig) allocated(t *testing.T, from, requestID string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := r.created(t, from, requestID)
	addr := common.HexToAddress(from)
	f := r.fences[addr]
	if _, err := r.store.Simulated(ctx, f, id, 21000); err != nil {
		t.Fatal(err)
	}
	fees := txmanager.Fees{MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
	if _, err := r.store.Allocate(ctx, f, []uuid.UUID{id}, []txmanager.Fees{fees}, r.nonces[addr]); err != nil {
		t.Fatal(err)
	}
	r.nonces[addr]++
	return id
}

type actionJSON struct {
	ActionID    string     `json:"action_id"`
	TxID        string     `json:"tx_id"`
	Action      string     `json:"action"`
	Operator    string     `json:"operator"`
	RequestedAt time.Time  `json:"requested_at"`
	DoneAt      *time.Time `json:"done_at"`
	Outcome     *string    `json:"outcome"`
	Detail      *string    `json:"detail"`
	Attempt     *int       `json:"attempt"`
	FillerTxID  *string    `json:"filler_tx_id"`
}

func actionBody(action, operator string) string {
	return fmt.Sprintf(`{"action": %q, "operator": %q}`, action, operator)
}

// TestActionsAreRecordedAndListed: a resend and a bump on a broadcast
// transaction are recorded and answered 202, pending; the list shows them
// oldest first, and the outcome once the owner has recorded it.
func TestActionsAreRecordedAndListed(t *testing.T) {
	t.Parallel()
	r := startActions(t)
	id := r.broadcast(t, signer, "act-1").String()
	path := "/internal/v1/tx/" + id + "/actions"

	code, b := r.Do(t, "gateway", "GET", path, "")
	if code != http.StatusOK || string(b) != `{"actions":[]}`+"\n" {
		t.Fatalf("no actions yet: %d %s", code, b)
	}
	var requested []actionJSON
	for _, c := range []struct{ action, operator string }{{"resend", "alice@ops"}, {"bump", "bob@ops"}} {
		code, b := r.Do(t, "gateway", "POST", path, actionBody(c.action, c.operator))
		if code != http.StatusAccepted {
			t.Fatalf("%s: %d %s, want 202", c.action, code, b)
		}
		act := servicetest.Decode[actionJSON](t, b)
		if act.TxID != id || act.Action != c.action || act.Operator != c.operator || act.ActionID == "" ||
			act.RequestedAt.Location() != time.UTC || act.DoneAt != nil || act.Outcome != nil || act.Attempt != nil {
			t.Errorf("%s answered %s", c.action, b)
		}
		requested = append(requested, act)
	}
	stored, err := r.store.Actions(context.Background(), uuid.MustParse(id))
	if err != nil || len(stored) != 2 || stored[0].ID.String() != requested[0].ActionID || stored[1].Action != txmanager.ActionBump ||
		stored[0].Key != r.fences[common.HexToAddress(signer)].Key {
		t.Fatalf("stored %+v (%v)", stored, err)
	}

	code, b = r.Do(t, "gateway", "GET", path, "")
	list := servicetest.Decode[struct{ Actions []actionJSON }](t, b)
	if code != http.StatusOK || len(list.Actions) != 2 || list.Actions[0].ActionID != requested[0].ActionID ||
		list.Actions[1].ActionID != requested[1].ActionID || strings.Contains(string(b), "outcome") || strings.Contains(string(b), "done_at") {
		t.Fatalf("list, pending: %d %s", code, b)
	}

	// The owner refuses the bump.
	if err := r.store.FinishAction(context.Background(), r.fences[common.HexToAddress(signer)], stored[1].ID, txmanager.ActionRefused, "why", nil); err != nil {
		t.Fatal(err)
	}
	code, b = r.Do(t, "gateway", "GET", path, "")
	list = servicetest.Decode[struct{ Actions []actionJSON }](t, b)
	if code != http.StatusOK || len(list.Actions) != 2 {
		t.Fatalf("list: %d %s", code, b)
	}
	if bump := list.Actions[1]; bump.Outcome == nil || *bump.Outcome != "refused" || bump.Detail == nil || *bump.Detail != "why" ||
		bump.DoneAt == nil || bump.DoneAt.Location() != time.UTC || bump.Attempt != nil {
		t.Errorf("the refused bump: %s", b)
	}
	if resend := list.Actions[0]; resend.Outcome != nil || resend.DoneAt != nil {
		t.Errorf("the resend, still pending: %s", b)
	}

	// Only the gateway may ask or read.
	if code, b := r.Do(t, "ledger", "POST", path, actionBody("resend", "alice@ops")); code != http.StatusForbidden {
		t.Errorf("the ledger asks: %d %s, want 403", code, b)
	}
	if code, b := r.Do(t, "ledger", "GET", path, ""); code != http.StatusForbidden {
		t.Errorf("the ledger reads: %d %s, want 403", code, b)
	}
}

// TestActionConflictsAndUnknownTx: an unknown transaction is a 404, one
// not broadcast yet a 409, and a cancel a 409 at once when the signer's
// cancels are off, a 202 when they are on.
func TestActionConflictsAndUnknownTx(t *testing.T) {
	t.Parallel()
	r := startActions(t)
	unknown := "/internal/v1/tx/0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7/actions"
	for _, action := range []string{"resend", "bump", "cancel"} {
		if code, b := r.Do(t, "gateway", "POST", unknown, actionBody(action, "alice@ops")); code != http.StatusNotFound {
			t.Errorf("%s on an unknown transaction: %d %s, want 404", action, code, b)
		}
	}
	if code, b := r.Do(t, "gateway", "GET", unknown, ""); code != http.StatusNotFound {
		t.Errorf("the actions of an unknown transaction: %d %s, want 404", code, b)
	}

	idle := r.created(t, signer, "idle").String()
	if code, b := r.Do(t, "gateway", "POST", "/internal/v1/tx/"+idle+"/actions", actionBody("bump", "alice@ops")); code != http.StatusConflict ||
		!strings.Contains(string(b), "is INIT") {
		t.Errorf("bump of an INIT transaction: %d %s, want 409", code, b)
	}

	off := r.broadcast(t, signer, "off").String()
	code, b := r.Do(t, "gateway", "POST", "/internal/v1/tx/"+off+"/actions", actionBody("cancel", "alice@ops"))
	want := fmt.Sprintf(`cancels are off for signer %s on chain 31337 (chains file: \"cancels\": true)`, signer)
	if code != http.StatusConflict || !strings.Contains(string(b), want) {
		t.Errorf("cancel with the signer's cancels off: %d %s, want 409 mentioning %s", code, b, want)
	}
	if acts, err := r.store.Actions(context.Background(), uuid.MustParse(off)); err != nil || len(acts) != 0 {
		t.Errorf("a refused cancel stored %+v (%v)", acts, err)
	}

	on := r.broadcast(t, another, "on").String()
	code, b = r.Do(t, "gateway", "POST", "/internal/v1/tx/"+on+"/actions", actionBody("cancel", "alice@ops"))
	if act := servicetest.Decode[actionJSON](t, b); code != http.StatusAccepted || act.Action != "cancel" || act.TxID != on {
		t.Errorf("cancel with the signer's cancels on: %d %s, want 202", code, b)
	}
	idleOn := r.created(t, another, "idle-on").String()
	if code, b := r.Do(t, "gateway", "POST", "/internal/v1/tx/"+idleOn+"/actions", actionBody("cancel", "alice@ops")); code != http.StatusConflict {
		t.Errorf("cancel of an INIT transaction, cancels on: %d %s, want 409", code, b)
	}
}

// TestBadActionsGetAProblemDocument: each bad request is refused with a
// problem naming the field, and nothing is stored.
func TestBadActionsGetAProblemDocument(t *testing.T) {
	t.Parallel()
	r := startActions(t)
	id := r.broadcast(t, signer, "bad").String()
	path := "/internal/v1/tx/" + id + "/actions"
	tests := []struct{ name, path, body, want string }{
		{"a bad action", path, actionBody("speed-up", "alice@ops"), "action: one of resend, bump, cancel, abandon"},
		{"no action", path, `{"operator": "alice@ops"}`, "action: one of resend, bump, cancel, abandon"},
		{"an action id not a uuid", path, `{"action": "resend", "operator": "alice@ops", "action_id": "7"}`, `"pointer":"/action_id"`},
		{"an action id in capitals", path, `{"action": "resend", "operator": "alice@ops", "action_id": "0193A2C7-41D0-7E8A-B5F3-2C9D8E7F6A10"}`, "action_id: a UUID"},
		{"a missing operator", path, `{"action": "resend"}`, "operator: 1 to 255 characters"},
		{"an empty operator", path, actionBody("resend", ""), "operator: 1 to 255 characters"},
		{"an operator too long", path, actionBody("resend", strings.Repeat("é", 256)), "operator: 1 to 255 characters"},
		{"an operator with a NUL", path, `{"action": "resend", "operator": "al\u0000ice"}`, "operator: no control characters"},
		{"an unknown field", path, `{"action": "resend", "operator": "alice@ops", "nonce": 7}`, "nonce"},
		{"not JSON", path, `{"action": `, "request body"},
		{"a tx id not a uuid", "/internal/v1/tx/not-a-uuid/actions", actionBody("resend", "alice@ops"), "tx_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := r.Do(t, "gateway", "POST", tt.path, tt.body)
			if code != http.StatusBadRequest || !strings.Contains(string(b), tt.want) || !strings.Contains(string(b), "urn:txfence:problem:") {
				t.Errorf("%d %s; want a 400 problem mentioning %q", code, b, tt.want)
			}
		})
	}
	if code, b := r.Do(t, "gateway", "POST", path, actionBody("resend", strings.Repeat("é", 255))); code != http.StatusAccepted {
		t.Errorf("an operator of 255 characters: %d %s, want 202", code, b)
	}
	if acts, err := r.store.Actions(context.Background(), uuid.MustParse(id)); err != nil || len(acts) != 1 {
		t.Errorf("%d actions stored (%v), want only the good one", len(acts), err)
	}
}

// TestActionsBeforeTheBroadcast: ALLOCATED and SIGNED transactions take
// every action; abandon is refused for a BROADCASTED one (cancel it
// instead) and for one not allocated yet; abandoning a SIGNED one replaces
// it at its nonce, so it needs the signer's cancels, like a cancel.
func TestActionsBeforeTheBroadcast(t *testing.T) {
	t.Parallel()
	r := startActions(t)
	post := func(id uuid.UUID, action string) (int, []byte) {
		t.Helper()
		return r.Do(t, "gateway", "POST", "/internal/v1/tx/"+id.String()+"/actions", actionBody(action, "alice@ops"))
	}
	allocated, signedOff, signedOn := r.allocated(t, signer, "allocated"), r.signed(t, signer, "signed-off"), r.signed(t, another, "signed-on")
	for _, c := range []struct {
		id      uuid.UUID
		actions []string
	}{
		{allocated, []string{"resend", "bump", "abandon"}},
		{signedOff, []string{"resend", "bump"}},
		{signedOn, []string{"resend", "bump", "cancel", "abandon"}},
	} {
		for _, action := range c.actions {
			code, b := post(c.id, action)
			if act := servicetest.Decode[actionJSON](t, b); code != http.StatusAccepted || act.Action != action || act.TxID != c.id.String() || act.Outcome != nil {
				t.Errorf("%s of %s: %d %s, want 202", action, c.id, code, b)
			}
		}
	}
	for _, c := range []struct {
		name   string
		id     uuid.UUID
		action string
		want   string
	}{
		{"cancel, cancels off", allocated, "cancel", "cancels are off"},
		{"abandon SIGNED, cancels off", signedOff, "abandon", "a SIGNED transaction is abandoned by a transfer that replaces it at its nonce"},
		{"abandon BROADCASTED", r.broadcast(t, another, "broadcast"), "abandon", "cancel it instead"},
		{"abandon INIT", r.created(t, another, "init"), "abandon", "is INIT"},
	} {
		if code, b := post(c.id, c.action); code != http.StatusConflict || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s, want 409 mentioning %q", c.name, code, b, c.want)
		}
	}
}

// TestRepeatedActionsAreOneAction: a request under an action id already
// used answers the action recorded (200), whatever became of the
// transaction since; another request under it is a 409. Without an action
// id, the same request while it waits is the one waiting (200). The same
// action asked by another operator is recorded, and carried out once:
// finished with the first, and listed once to the owner meanwhile.
func TestRepeatedActionsAreOneAction(t *testing.T) {
	t.Parallel()
	r := startActions(t)
	ctx := context.Background()
	id := r.signed(t, another, "repeated")
	path := "/internal/v1/tx/" + id.String() + "/actions"
	const actionID = "0193a2c7-41d0-7e8a-b5f3-2c9d8e7f6a10"
	withID := func(action, operator string) string {
		return fmt.Sprintf(`{"action": %q, "operator": %q, "action_id": %q}`, action, operator, actionID)
	}

	code, b := r.Do(t, "gateway", "POST", path, withID("bump", "alice@ops"))
	first := servicetest.Decode[actionJSON](t, b)
	if code != http.StatusAccepted || first.ActionID != actionID {
		t.Fatalf("bump with an action id: %d %s", code, b)
	}
	if code, b := r.Do(t, "gateway", "POST", path, withID("bump", "alice@ops")); code != http.StatusOK || servicetest.Decode[actionJSON](t, b).RequestedAt != first.RequestedAt {
		t.Errorf("the same again: %d %s, want 200 with %+v", code, b, first)
	}
	for _, body := range []string{withID("resend", "alice@ops"), withID("bump", "bob@ops")} {
		if code, b := r.Do(t, "gateway", "POST", path, body); code != http.StatusConflict || !strings.Contains(string(b), actionID) {
			t.Errorf("another request under the id (%s): %d %s, want 409", body, code, b)
		}
	}
	other := r.signed(t, another, "other")
	if code, b := r.Do(t, "gateway", "POST", "/internal/v1/tx/"+other.String()+"/actions", withID("bump", "alice@ops")); code != http.StatusConflict {
		t.Errorf("the id on another transaction: %d %s, want 409", code, b)
	}

	// Without an id: the same request waiting is the one answered.
	code, b = r.Do(t, "gateway", "POST", path, actionBody("bump", "alice@ops"))
	if again := servicetest.Decode[actionJSON](t, b); code != http.StatusOK || again.ActionID != actionID {
		t.Errorf("the same bump without an id while one waits: %d %s, want 200 with %s", code, b, actionID)
	}
	code, b = r.Do(t, "gateway", "POST", path, actionBody("bump", "bob@ops"))
	bobs := servicetest.Decode[actionJSON](t, b)
	if code != http.StatusAccepted || bobs.ActionID == actionID {
		t.Fatalf("another operator's bump: %d %s, want 202 with an action of its own", code, b)
	}
	f := r.fences[common.HexToAddress(another)]
	pending, err := r.store.WorkerActions(ctx, f.Key)
	if err != nil || len(pending) != 1 || pending[0].ID.String() != actionID {
		t.Errorf("the owner's list: %+v %v, want alice's bump only", pending, err)
	}

	// The owner carries out alice's bump: bob's is done with it.
	attempt := 2
	if err := r.store.FinishAction(ctx, f, uuid.MustParse(actionID), txmanager.ActionDone, "", &attempt); err != nil {
		t.Fatal(err)
	}
	acts, err := r.store.Actions(ctx, id)
	if err != nil || len(acts) != 2 {
		t.Fatalf("actions %+v %v", acts, err)
	}
	for _, a := range acts {
		if a.Outcome != txmanager.ActionDone || a.Attempt == nil || *a.Attempt != 2 {
			t.Errorf("%s by %s: %q attempt %v, want done with attempt 2", a.ID, a.Operator, a.Outcome, a.Attempt)
		}
	}
	if acts[1].Detail != "carried out as action "+actionID {
		t.Errorf("bob's bump: detail %q", acts[1].Detail)
	}
	if pending, err := r.store.WorkerActions(ctx, f.Key); err != nil || len(pending) != 0 {
		t.Errorf("pending after: %+v %v", pending, err)
	}

	// Done, and the transaction moved on: the id still answers the action.
	code, b = r.Do(t, "gateway", "POST", path, actionBody("bump", "alice@ops"))
	if code != http.StatusAccepted || servicetest.Decode[actionJSON](t, b).ActionID == actionID {
		t.Errorf("a bump after the first was done: %d %s, want a new action", code, b)
	}
	if _, err := r.store.Broadcasted(ctx, f, []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, b := r.Do(t, "gateway", "POST", path, withID("bump", "alice@ops")); code != http.StatusOK || servicetest.Decode[actionJSON](t, b).Outcome == nil {
		t.Errorf("the id again, done: %d %s, want 200 with its outcome", code, b)
	}
}
