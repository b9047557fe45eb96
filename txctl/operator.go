package txctl

import (
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

const actionAbout = `Asks the signer's owner node to act on a transaction that does not move:
ALLOCATED (signerd refused to sign it), SIGNED (every route refused it,
or not broadcast yet) or BROADCASTED and not mined yet; returns at once,
and the outcome shows in 'txctl actions ID' within about a second. The
key's name is recorded as the operator.

--action-id makes the request idempotent: run again with the same id, it
shows the action recorded (marked repeated) instead of asking again.
Without it, the same action by the same key while one waits is the one
waiting.`

func operatorCommands() []*command {
	action := func(kind components.TxActionKind) func(*flag.FlagSet) func(*env, []string) error {
		return func(fs *flag.FlagSet) func(*env, []string) error {
			var actionID string
			fs.StringVar(&actionID, "action-id", "", "make the request idempotent under this `UUID` (lowercase)")
			return func(x *env, args []string) error { return runAction(x, args[0], kind, actionID) }
		}
	}
	const group = "Operations (scope admin)"
	return []*command{
		{name: "resend", group: group, summary: "send a transaction's current attempt again now (ask signerd again, if ALLOCATED)", args: "ID",
			minArgs: 1, maxArgs: 1, about: actionAbout, define: action(components.TxActionResend)},
		{name: "bump", group: group, summary: "replace it with fees at least 10% higher (price it anew, if ALLOCATED and refused)", args: "ID",
			minArgs: 1, maxArgs: 1, about: actionAbout, define: action(components.TxActionBump)},
		{name: "cancel-onchain", group: group, summary: "replace it with a 0-value transfer to the signer itself", args: "ID",
			minArgs: 1, maxArgs: 1, about: actionAbout + "\n\nOnly where the signer's policy allows cancels; else 409.", define: action(components.TxActionCancel)},
		{name: "abandon", group: group, summary: "fail an ALLOCATED or SIGNED transaction; a 0-value transfer to the signer takes its nonce",
			args: "ID", minArgs: 1, maxArgs: 1, about: actionAbout + `

abandon: the transaction ends FAILED (reason abandoned) and its nonce goes
to a new transaction, a 0-value transfer from the signer to itself (the
action's filler_tx_id), signed and sent like any other, so that the
signer's later nonces are mined. A SIGNED transaction's filler replaces it
at its nonce, a cancel: its signer must allow cancels. A BROADCASTED one
cannot be abandoned (it may be mined any moment): cancel-onchain it.`, define: action(components.TxActionAbandon)},
		{name: "actions", group: group, summary: "a transaction's operator actions and their outcomes (scope tx:read)", args: "ID",
			minArgs: 1, maxArgs: 1, define: func(*flag.FlagSet) func(*env, []string) error { return runActions }},
		{name: "signers", group: group, summary: "the signers the key may use (scope tx:read)",
			define: func(*flag.FlagSet) func(*env, []string) error { return runSigners }},
		{name: "signer", group: group, summary: "where a signer stands: lease owner, next nonce, transactions per state",
			args: "CHAIN_ID ADDRESS", minArgs: 2, maxArgs: 2,
			define: func(*flag.FlagSet) func(*env, []string) error { return runSigner }},
	}
}

func runAction(x *env, arg string, kind components.TxActionKind, actionID string) error {
	id, err := parseID(x.cmd.name, "transaction", arg)
	if err != nil {
		return err
	}
	req := gatewayapi.TxActionRequest{Action: kind}
	if actionID != "" {
		aid, err := uuid.Parse(actionID)
		if err != nil || aid.String() != actionID {
			return usagef(x.cmd.name, "--action-id %q is not a UUID in lowercase", actionID)
		}
		req.ActionId = &aid
	}
	resp, err := x.api.RequestTxActionWithResponse(x.ctx, id, req)
	if err := x.check(fmt.Sprintf("%s transaction %s", kind, id), resp, err, http.StatusAccepted, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	if resp.JSON200 != nil {
		return printAction(x, resp.JSON200, true)
	}
	return printAction(x, resp.JSON202, false)
}

// printAction prints an action; repeated marks the one a repeated
// request named, recorded before.
func printAction(x *env, a *components.TxAction, repeated bool) error {
	var f fields
	f.add("action_id", a.ActionId.String())
	if repeated {
		f.add("repeated", "yes: asked before; the action as recorded")
	}
	f.add("tx_id", a.TxId.String())
	f.add("action", string(a.Action))
	f.add("operator", a.Operator)
	f.add("requested_at", formatTime(a.RequestedAt))
	if a.Outcome != nil {
		f.add("outcome", string(*a.Outcome))
	} else {
		f.add("outcome", "pending: see 'txctl actions "+a.TxId.String()+"'")
	}
	f.time("done_at", a.DoneAt)
	f.str("detail", a.Detail)
	if a.Attempt != nil {
		f.add("attempt", strconv.Itoa(int(*a.Attempt)))
	}
	if a.FillerTxId != nil {
		f.add("filler_tx_id", a.FillerTxId.String())
	}
	return f.write(x.stdout)
}

func runActions(x *env, args []string) error {
	id, err := parseID("actions", "transaction", args[0])
	if err != nil {
		return err
	}
	resp, err := x.api.ListTxActionsWithResponse(x.ctx, id)
	if err := x.check("list the actions of "+id.String(), resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	t := newTable(x.stdout, "ACTION_ID", "ACTION", "OPERATOR", "REQUESTED", "OUTCOME", "DONE", "ATTEMPT", "FILLER", "DETAIL")
	for _, a := range resp.JSON200.Actions {
		outcome := "pending"
		if a.Outcome != nil {
			outcome = string(*a.Outcome)
		}
		attempt := ""
		if a.Attempt != nil {
			attempt = strconv.Itoa(int(*a.Attempt))
		}
		filler := ""
		if a.FillerTxId != nil {
			filler = a.FillerTxId.String()
		}
		t.row(a.ActionId.String(), string(a.Action), a.Operator, formatTime(a.RequestedAt), outcome, formatTimePtr(a.DoneAt), attempt, filler, deref(a.Detail))
	}
	return t.flush()
}

func runSigners(x *env, _ []string) error {
	resp, err := x.api.ListSignersWithResponse(x.ctx)
	if err := x.check("list signers", resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	t := newTable(x.stdout, "CHAIN_ID", "ADDRESS")
	for _, s := range resp.JSON200.Signers {
		t.row(strconv.FormatInt(s.ChainId, 10), s.Address)
	}
	return t.flush()
}

func runSigner(x *env, args []string) error {
	chainID, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || chainID < 1 {
		return usagef("signer", "%q is not a chain id", args[0])
	}
	resp, err := x.api.GetSignerStatusWithResponse(x.ctx, chainID, args[1])
	if err := x.check(fmt.Sprintf("signer %d:%s", chainID, args[1]), resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	s := resp.JSON200
	var f fields
	f.add("chain_id", strconv.FormatInt(s.ChainId, 10))
	f.add("signer", s.Signer)
	if s.Owner != nil {
		f.add("owner", *s.Owner)
	} else {
		f.add("owner", "none: no node holds an unexpired lease")
	}
	f.add("fencing_token", strconv.FormatInt(s.FencingToken, 10))
	f.time("lease_expires_at", s.LeaseExpiresAt)
	f.int("next_nonce", s.NextNonce)
	f.time("oldest_open_since", s.OldestOpenSince)
	if s.OldestOpenAgeSeconds != nil {
		f.add("oldest_open_age", fmt.Sprintf("%.0f s", *s.OldestOpenAgeSeconds))
	}
	// The states in the order of the state machine; any the API adds
	// later, after them.
	order := map[string]int{}
	for i, st := range allStates {
		order[string(st)] = i
	}
	states := make([]string, 0, len(s.Counts))
	for st := range s.Counts {
		states = append(states, st)
	}
	sort.Slice(states, func(i, j int) bool {
		oi, iok := order[states[i]]
		oj, jok := order[states[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return states[i] < states[j]
	})
	for _, st := range states {
		f.add("count "+st, strconv.Itoa(s.Counts[st]))
	}
	return f.write(x.stdout)
}
