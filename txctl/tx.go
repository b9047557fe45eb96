package txctl

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

func txCommands() []*command {
	return []*command{
		{name: "create", group: "Transactions", summary: "send a transaction intent",
			args: "--chain-id N --from ADDRESS [--to ADDRESS] [--value WEI] [flags]",
			about: `The intent is stored durably before the answer comes; follow it with
'txctl watch ID'. Without --idempotency-key txctl makes a random one and
prints it on standard error before sending, so that a create whose answer
was lost can be retried safely with the same key: the API then answers the
transaction accepted the first time, and txctl says it was replayed.`,
			define: defineCreate},
		{name: "get", group: "Transactions", summary: "one transaction",
			args: "ID | --request-id KEY --chain-id N --from ADDRESS", maxArgs: 1,
			about: `With --request-id, the transaction a create's idempotency key names
(for a client that lost the answer to its create).`,
			define: defineGet},
		{name: "list", group: "Transactions", summary: "the tenant's transactions, newest first", define: defineList},
		{name: "cancel", group: "Transactions", summary: "cancel a transaction that has no nonce yet", args: "ID", minArgs: 1, maxArgs: 1,
			about: `INIT, SIMULATED and PENDING_APPROVAL transactions become CANCELLED. One that
has a nonce answers 409: an operator can still replace it on chain with
'txctl cancel-onchain ID'.`,
			define: func(fs *flag.FlagSet) func(*env, []string) error { return runCancel }},
		{name: "watch", group: "Transactions", summary: "follow events as they happen (Server-Sent Events)", args: "[ID]", maxArgs: 1, streams: true,
			about: watchAbout, define: defineWatch},
	}
}

func defineCreate(fs *flag.FlagSet) func(*env, []string) error {
	var (
		chainID                          int64
		from, to, value, data            string
		gas                              int64
		maxFee, maxPriorityFee, route    string
		dependsOn, metadata, idempotency string
	)
	fs.Int64Var(&chainID, "chain-id", 0, "the chain's `ID` (required)")
	fs.StringVar(&from, "from", "", "the signer, an `ADDRESS` the tenant owns (required)")
	fs.StringVar(&to, "to", "", "the destination `ADDRESS`; absent for a contract creation")
	fs.StringVar(&value, "value", "", "wei to send, a decimal `WEI` amount (default 0)")
	fs.StringVar(&data, "data", "", "call data or init code, 0x-prefixed `HEX`")
	fs.Int64Var(&gas, "gas", 0, "the gas `LIMIT` (default: estimated at simulation)")
	fs.StringVar(&maxFee, "max-fee", "", "the most to pay per gas, `WEI`")
	fs.StringVar(&maxPriorityFee, "max-priority-fee", "", "the most to tip per gas, `WEI`")
	fs.StringVar(&route, "route", "", "the broadcast `ROUTE`: public, private or auto")
	fs.StringVar(&dependsOn, "depends-on", "", "transaction `IDS` (comma separated, up to 16, on any chain) that must all be CONFIRMED first")
	fs.StringVar(&metadata, "metadata", "", "the client's own `JSON` object, stored and returned unchanged; - reads it from standard input")
	fs.StringVar(&idempotency, "idempotency-key", "", "the request's `KEY` (default: a random UUID, printed)")
	return func(x *env, _ []string) error {
		set := given(fs)
		if !set["chain-id"] || from == "" {
			return usagef("create", "create needs --chain-id and --from")
		}
		body := gatewayapi.CreateTxRequest{ChainId: chainID, From: from}
		optional := func(name string, v string, dst **string) {
			if set[name] {
				*dst = &v
			}
		}
		optional("to", to, &body.To)
		optional("value", value, &body.Value)
		optional("data", data, &body.Data)
		optional("max-fee", maxFee, &body.MaxFeePerGas)
		optional("max-priority-fee", maxPriorityFee, &body.MaxPriorityFeePerGas)
		if set["gas"] {
			body.Gas = &gas
		}
		if set["route"] {
			r, err := enumFlag("create", "route", route, components.Route.Valid, components.RoutePublic, components.RoutePrivate, components.RouteAuto)
			if err != nil {
				return err
			}
			body.Route = &r
		}
		if set["depends-on"] {
			var ids components.DependsOnRequest1
			for _, s := range strings.Split(dependsOn, ",") {
				id, err := parseID("create", "transaction", strings.TrimSpace(s))
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			body.DependsOn = new(components.DependsOnRequest)
			if err := body.DependsOn.FromDependsOnRequest1(ids); err != nil {
				return err
			}
		}
		if metadata == "-" && x.stdin == nil {
			return usagef("create", "--metadata -: no standard input")
		}
		if metadata == "-" {
			b, err := io.ReadAll(io.LimitReader(x.stdin, maxMetadata+1))
			if err != nil {
				return fmt.Errorf("read --metadata from standard input: %w", err)
			}
			if len(b) > maxMetadata {
				return usagef("create", "--metadata: more than %d bytes on standard input", maxMetadata)
			}
			metadata = string(b)
		}
		if set["metadata"] {
			m, err := parseMetadata(metadata)
			if err != nil {
				return err
			}
			body.Metadata = &m
		}
		if !set["idempotency-key"] {
			idempotency = uuid.NewString()
			// Before sending: if the answer is lost, this is how to retry.
			x.note("idempotency key %s (to retry this create safely: --idempotency-key %s)", idempotency, idempotency)
		}
		resp, err := x.api.CreateTxWithResponse(x.ctx, &gatewayapi.CreateTxParams{IdempotencyKey: idempotency}, body)
		if err := x.check("create", resp, err, http.StatusCreated, http.StatusOK); err != nil {
			return err
		}
		replayed := resp.StatusCode() == http.StatusOK
		if x.json {
			if replayed {
				x.note("replayed: idempotency key %s was used before with the same body; this is the transaction accepted then", idempotency)
			}
			return x.jsonLine(resp.Body)
		}
		tx := resp.JSON201
		if replayed {
			tx = resp.JSON200
		}
		return printTx(x, tx, resp.Body, func(f *fields) {
			if replayed {
				f.add("replayed", "yes: accepted earlier under this idempotency key, with the same body")
			}
		})
	}
}

// maxMetadata bounds metadata read from standard input: the API takes
// 16 KiB, and the rest of a larger input is the API's to refuse.
const maxMetadata = 1 << 20

// parseMetadata reads --metadata, keeping its numbers as written: the
// API stores metadata unchanged, and a float would round a long number.
func parseMetadata(s string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, usagef("create", "--metadata: want a JSON object, such as '{\"order\": \"A-1\"}'")
	}
	if dec.More() {
		return nil, usagef("create", "--metadata: want one JSON object, got more after it")
	}
	return m, nil
}

func defineGet(fs *flag.FlagSet) func(*env, []string) error {
	var requestID, from string
	var chainID int64
	fs.StringVar(&requestID, "request-id", "", "find the transaction by the idempotency `KEY` its create sent")
	fs.Int64Var(&chainID, "chain-id", 0, "with --request-id: the chain's `ID`")
	fs.StringVar(&from, "from", "", "with --request-id: the signer's `ADDRESS`")
	return func(x *env, args []string) error {
		set := given(fs)
		if set["request-id"] {
			if len(args) > 0 || !set["chain-id"] || from == "" {
				return usagef("get", "get --request-id needs --chain-id and --from, and no ID")
			}
			resp, err := x.api.GetTxByRequestWithResponse(x.ctx, &gatewayapi.GetTxByRequestParams{ChainId: chainID, From: from, RequestId: requestID})
			if err := x.check("get transaction by request id", resp, err, http.StatusOK); err != nil {
				return err
			}
			return x.printTxResponse(resp.JSON200, resp.Body)
		}
		if len(args) != 1 || set["chain-id"] || set["from"] {
			return usagef("get", "get takes a transaction ID, or --request-id with --chain-id and --from")
		}
		id, err := parseID("get", "transaction", args[0])
		if err != nil {
			return err
		}
		tx, body, err := x.getTx(id)
		if err != nil {
			return err
		}
		return x.printTxResponse(tx, body)
	}
}

func (x *env) getTx(id uuid.UUID) (*components.Tx, []byte, error) {
	resp, err := x.api.GetTxWithResponse(x.ctx, id)
	if err := x.check("get transaction "+id.String(), resp, err, http.StatusOK); err != nil {
		return nil, nil, err
	}
	return resp.JSON200, resp.Body, nil
}

func (x *env) printTxResponse(tx *components.Tx, body []byte) error {
	if x.json {
		return x.jsonLine(body)
	}
	return printTx(x, tx, body, nil)
}

// printTx prints one transaction; extra adds fields at the top.
func printTx(x *env, tx *components.Tx, body []byte, extra func(*fields)) error {
	var f fields
	if extra != nil {
		extra(&f)
	}
	f.add("tx_id", tx.TxId.String())
	state := string(tx.State)
	if tx.SubState != nil {
		state += " (" + string(*tx.SubState) + ")"
	}
	f.add("state", state)
	f.str("reason", tx.Reason)
	f.time("approval_expires_at", tx.ApprovalExpiresAt)
	f.add("chain_id", strconv.FormatInt(tx.ChainId, 10))
	f.add("from", tx.From)
	if tx.To != nil {
		f.add("to", *tx.To)
	} else {
		f.add("to", "(contract creation)")
	}
	f.add("value", tx.Value+" wei")
	f.add("data", shortData(tx.Data))
	f.int("nonce", tx.Nonce)
	f.str("hash", tx.Hash)
	f.int("gas", tx.Gas)
	f.int("gas_limit", tx.GasLimit)
	f.str("max_fee_per_gas", tx.MaxFeePerGas)
	f.str("max_priority_fee_per_gas", tx.MaxPriorityFeePerGas)
	f.str("fee_ceiling", tx.FeeCeiling)
	f.add("route", string(tx.Route))
	if tx.DependsOn != nil {
		ids := make([]string, len(*tx.DependsOn))
		for i, id := range *tx.DependsOn {
			ids[i] = id.String()
		}
		f.add("depends_on", strings.Join(ids, ", "))
	}
	f.add("request_id", tx.RequestId)
	// The metadata as the API sent it: the decoded map holds floats.
	var raw struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(body, &raw) == nil && len(raw.Metadata) > 0 && string(raw.Metadata) != "{}" {
		var buf bytes.Buffer
		if json.Compact(&buf, raw.Metadata) == nil {
			f.add("metadata", buf.String())
		}
	}
	f.add("created_at", formatTime(tx.CreatedAt))
	f.add("updated_at", formatTime(tx.UpdatedAt))
	return f.write(x.stdout)
}

func defineList(fs *flag.FlagSet) func(*env, []string) error {
	var chainID int64
	var from, state, subState, after, before string
	var p pagination
	fs.Int64Var(&chainID, "chain-id", 0, "only transactions on chain `ID`")
	fs.StringVar(&from, "from", "", "only transactions of the signer at `ADDRESS`")
	fs.StringVar(&state, "state", "", "only in this `STATE` (INIT, ..., CONFIRMED, REVERTED, FAILED, CANCELLED)")
	fs.StringVar(&subState, "sub-state", "", "only in this `SUB_STATE` (stuck, insufficient_funds, ...)")
	fs.StringVar(&after, "created-after", "", "only created at or after `TIME` (RFC 3339, or a duration ago: 24h)")
	fs.StringVar(&before, "created-before", "", "only created before `TIME` (RFC 3339, or a duration ago)")
	definePagination(fs, &p)
	return func(x *env, _ []string) error {
		set := given(fs)
		var params gatewayapi.ListTxParams
		if set["chain-id"] {
			params.ChainId = &chainID
		}
		if set["from"] {
			params.From = &from
		}
		if set["state"] {
			s, err := enumFlag("list", "state", state, components.TxState.Valid, allStates...)
			if err != nil {
				return err
			}
			params.State = &s
		}
		if set["sub-state"] {
			s, err := enumFlag("list", "sub-state", subState, components.TxSubState.Valid, components.SubStateWaitingDependency,
				components.SubStateInsufficientFunds, components.SubStateIncluded, components.SubStateStuck, components.SubStateStale, components.SubStateReplaced)
			if err != nil {
				return err
			}
			params.SubState = &s
		}
		for _, tf := range []struct {
			name, value string
			dst         **time.Time
		}{{"created-after", after, &params.CreatedAfter}, {"created-before", before, &params.CreatedBefore}} {
			if set[tf.name] {
				t, err := parseTimeOrAgo("list", tf.name, tf.value, x.now())
				if err != nil {
					return err
				}
				*tf.dst = &t
			}
		}
		limit, _, err := p.params("list")
		if err != nil {
			return err
		}
		params.Limit = limit
		out := newTxTable(x, false)
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListTxWithResponse(x.ctx, &params)
			if err := x.check("list transactions", resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			return resp.JSON200.NextCursor, out.page(resp.Body, resp.JSON200.Transactions)
		})
	}
}

var allStates = []components.TxState{components.StateInit, components.StateSimulated, components.StatePendingApproval,
	components.StateAllocated, components.StateSigned, components.StateBroadcasted, components.StateConfirmed,
	components.StateReverted, components.StateFailed, components.StateCancelled}

// txTable prints pages of transactions: one JSON line per page, or rows
// under one header.
type txTable struct {
	x         *env
	approvals bool
	header    bool
}

func newTxTable(x *env, approvals bool) *txTable { return &txTable{x: x, approvals: approvals} }

func (t *txTable) page(body []byte, txs []components.Tx) error {
	if t.x.json {
		return t.x.jsonLine(body)
	}
	head := []string{"TX_ID", "STATE", "CHAIN", "NONCE", "FROM", "TO", "VALUE", "CREATED"}
	if t.approvals {
		head = []string{"TX_ID", "CHAIN", "FROM", "TO", "VALUE", "FEE_CEILING", "WAITS_UNTIL", "CREATED"}
	}
	// Each page is flushed as it comes, so a long --all shows progress;
	// the header comes once.
	var tb *table
	if t.header {
		tb = newTable(t.x.stdout)
	} else {
		tb = newTable(t.x.stdout, head...)
		t.header = true
	}
	for _, tx := range txs {
		state := string(tx.State)
		if tx.SubState != nil {
			state += "/" + string(*tx.SubState)
		}
		to := deref(tx.To)
		if tx.To == nil {
			to = "(creation)"
		}
		if t.approvals {
			tb.row(tx.TxId.String(), strconv.FormatInt(tx.ChainId, 10), tx.From, to, tx.Value, deref(tx.FeeCeiling), formatTimePtr(tx.ApprovalExpiresAt), formatTime(tx.CreatedAt))
			continue
		}
		tb.row(tx.TxId.String(), state, strconv.FormatInt(tx.ChainId, 10), formatInt(tx.Nonce), tx.From, to, tx.Value, formatTime(tx.CreatedAt))
	}
	return tb.flush()
}

func runCancel(x *env, args []string) error {
	id, err := parseID("cancel", "transaction", args[0])
	if err != nil {
		return err
	}
	resp, err := x.api.CancelTxWithResponse(x.ctx, id)
	if err := x.check("cancel transaction "+id.String(), resp, err, http.StatusOK); err != nil {
		return err
	}
	return x.printTxResponse(resp.JSON200, resp.Body)
}
