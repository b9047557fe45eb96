package txctl

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

func approvalCommands() []*command {
	return []*command{
		{name: "approvals", group: "Approvals", summary: "transactions waiting for approvals, newest first", define: defineApprovals},
		{name: "approve", group: "Approvals", summary: "show what a transaction does, then sign an approval with an approver's key and post it",
			args: "ID --key-file PATH [--approver NAME] [--max-fee WEI] [--ttl 1h] [--yes]", minArgs: 1, maxArgs: 1,
			about: `Reads the transaction, rebuilds from it the message docs/signer.md
("Approvals") defines, txfence/approval/v2: the intent (chain, sender,
type, destination, value, data), the tx id, the fee ceiling and the
expiry. Before signing it prints on standard error what the approval
covers: the chain, sender, destination, value in wei and ether, the call
data decoded by the signer's own policy decoder (a token transfer's
token contract, recipient and amount; an allowance's spender; an
operator; a token id; any other call's selector and length), the fees
the transaction asks for, the fee ceiling and the intent hash. Then it
asks "sign this approval? [y/N]" and reads the answer from standard
input: only y or yes signs it with the Ed25519 key of the key file and
posts it. Any other answer, or none (end of input), signs and sends
nothing and exits 1. --yes signs without asking, for scripts that have
checked the transaction themselves. --timeout bounds each request, not
the time taken to answer. The private key never leaves this machine.

A selector an ERC-20 and an ERC-721 call share (transferFrom, approve)
is shown in both readings: the signer's policy reads it by the standard
its policy file declares the contract to be.

The fee ceiling (--max-fee, wei per gas) is the highest fee cap the
approval covers: max_fee_per_gas of an eip1559 transaction, the gas
price of a legacy one (the tip is at most the fee cap). The signer counts
the approval for attempts at or below it; a fee bump above it needs new
approvals. Without --max-fee it is the transaction's fee_ceiling, the
most txmanager may ever sign it for, fee bumps included (the lower of
its own max_fee_per_gas and its signer's configured cap); a transaction
without one needs --max-fee.

The key file is the one 'signerctl approver new' writes; like signerd, txctl
refuses one that others may read (chmod 600 it). --approver, when given,
must be the id the key file names.

The intent includes the transaction's type (eip1559, or legacy on a chain
configured for gas-price pricing), which the transaction document carries.`,
			define: defineApprove},
		{name: "reject", group: "Approvals", summary: "show what a transaction does, then sign a rejection with an approver's key and post it (it FAILS)",
			args: "ID --key-file PATH [--approver NAME] [--ttl 1h] [--yes]", minArgs: 1, maxArgs: 1,
			about: `Like approve, with docs/signer.md's rejection message,
txfence/rejection/v1: the intent, the tx id and an expiry, and no fee
ceiling (a rejection holds at any fee). It prints the same decoded
intent on standard error, asks "sign this rejection? [y/N]" and signs
and posts only on y or yes (--yes skips the question). The signer checks
the rejection against the approvers of the rule that holds the
transaction; a good one fails it (approval_rejected) before a nonce is
spent. --ttl bounds how long the signed rejection may be presented.`,
			define: defineReject},
	}
}

func defineApprovals(fs *flag.FlagSet) func(*env, []string) error {
	var chainID int64
	var from string
	var p pagination
	fs.Int64Var(&chainID, "chain-id", 0, "only transactions on chain `ID`")
	fs.StringVar(&from, "from", "", "only transactions of the signer at `ADDRESS`")
	definePagination(fs, &p)
	return func(x *env, _ []string) error {
		set := given(fs)
		var params gatewayapi.ListPendingApprovalsParams
		if set["chain-id"] {
			params.ChainId = &chainID
		}
		if set["from"] {
			params.From = &from
		}
		limit, _, err := p.params("approvals")
		if err != nil {
			return err
		}
		params.Limit = limit
		out := newTxTable(x, true)
		return p.pages(x, func(cursor *string) (*string, error) {
			params.Cursor = cursor
			resp, err := x.api.ListPendingApprovalsWithResponse(x.ctx, &params)
			if err := x.check("list pending approvals", resp, err, http.StatusOK); err != nil {
				return nil, err
			}
			return resp.JSON200.NextCursor, out.page(resp.Body, resp.JSON200.Transactions)
		})
	}
}

// maxApprovalTTL is signerd's own bound on an approval's life ('signerd
// approver sign --ttl'); a policy's max_ttl may be tighter.
const maxApprovalTTL = 30 * 24 * time.Hour

func defineApprove(fs *flag.FlagSet) func(*env, []string) error {
	var keyFile, approver, maxFee string
	var ttl time.Duration
	var yes bool
	defineApproverFlags(fs, &keyFile, &approver, &ttl, &yes, "approval")
	fs.StringVar(&maxFee, "max-fee", "", "the fee ceiling, the highest fee cap per gas the approval covers, `WEI` (default: the transaction's fee_ceiling)")
	return func(x *env, args []string) error {
		var ceiling *big.Int
		if given(fs)["max-fee"] {
			if ceiling = weiAmount(maxFee); ceiling == nil {
				return usagef("approve", "--max-fee %q: want a decimal amount of wei per gas", maxFee)
			}
		}
		act, err := startApproverAct(x, "approve", args[0], keyFile, approver, ttl)
		if err != nil {
			return err
		}
		defer clear(act.priv)
		tx, req, id := act.tx, act.req, act.id
		if ceiling == nil {
			if tx.FeeCeiling == nil {
				return usagef("approve", "transaction %s has no fee_ceiling (no max_fee_per_gas of its own, no cap configured for its signer): give the highest fee cap per gas to approve with --max-fee", id)
			}
			if ceiling = weiAmount(*tx.FeeCeiling); ceiling == nil {
				return fmt.Errorf("transaction %s: fee_ceiling %q is not an amount of wei", id, *tx.FeeCeiling)
			}
		}
		if err := showIntent(x.stderr, tx, req, act.approver, ceiling, ttl); err != nil {
			return err
		}
		release, err := x.ask(yes, "sign this approval? [y/N] ")
		if err != nil {
			return err
		}
		defer release()
		// Whole seconds: the message carries the expiry in Unix seconds.
		// The approval's life starts now, after the answer.
		expiry := x.now().Add(ttl).Truncate(time.Second).UTC()
		a := signer.SignApproval(act.priv, act.approver, req, ceiling, expiry)
		resp, err := x.api.ApproveTxWithResponse(x.ctx, id, components.ApprovalRequest{Approver: a.Approver, MaxFeePerGas: a.MaxFeePerGas.String(),
			Expiry: a.Expiry, Signature: a.Signature})
		if err := x.check("approve transaction "+id.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		return printTx(x, resp.JSON200, resp.Body, func(f *fields) {
			f.add("approved_by", act.approver)
			f.add("approval_max_fee_per_gas", a.MaxFeePerGas.String()+" wei")
			f.add("approval_expiry", formatTime(a.Expiry))
			f.add("intent", req.Intent().Hex()+" ("+string(req.Type)+")")
			f.add("public_key", base64.StdEncoding.EncodeToString(act.priv.Public().(ed25519.PublicKey)))
		})
	}
}

func defineReject(fs *flag.FlagSet) func(*env, []string) error {
	var keyFile, approver string
	var ttl time.Duration
	var yes bool
	defineApproverFlags(fs, &keyFile, &approver, &ttl, &yes, "rejection")
	return func(x *env, args []string) error {
		act, err := startApproverAct(x, "reject", args[0], keyFile, approver, ttl)
		if err != nil {
			return err
		}
		defer clear(act.priv)
		if err := showIntent(x.stderr, act.tx, act.req, act.approver, nil, ttl); err != nil {
			return err
		}
		release, err := x.ask(yes, "sign this rejection? [y/N] ")
		if err != nil {
			return err
		}
		defer release()
		expiry := x.now().Add(ttl).Truncate(time.Second).UTC()
		r := signer.SignRejection(act.priv, act.approver, act.req, expiry)
		resp, err := x.api.RejectTxWithResponse(x.ctx, act.id, components.RejectRequest{Approver: r.Approver, Expiry: r.Expiry, Signature: r.Signature})
		if err := x.check("reject transaction "+act.id.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		return printTx(x, resp.JSON200, resp.Body, func(f *fields) {
			f.add("rejected_by", act.approver)
			f.add("rejection_expiry", formatTime(r.Expiry))
			f.add("intent", act.req.Intent().Hex()+" ("+string(act.req.Type)+")")
		})
	}
}

// defineApproverFlags defines the flags approve and reject share; what
// is "approval" or "rejection".
func defineApproverFlags(fs *flag.FlagSet, keyFile, approver *string, ttl *time.Duration, yes *bool, what string) {
	fs.StringVar(keyFile, "key-file", "", "`PATH` of the approver's key file, from 'signerctl approver new' (required)")
	fs.StringVar(approver, "approver", "", "the approver's `NAME` in the policy (default: the key file's id)")
	fs.DurationVar(ttl, "ttl", time.Hour, "how long the "+what+" counts, at most 720h; the policy's max_ttl may be shorter")
	fs.BoolVar(yes, "yes", false, "sign without asking (the intent is still printed); without it, only an answer of y or yes on standard input signs")
}

// approverAct is what an approval or a rejection starts from: the
// approver's key and name, and the transaction waiting for approvals with
// the request whose intent is signed.
type approverAct struct {
	id       uuid.UUID
	approver string
	priv     ed25519.PrivateKey
	tx       *components.Tx
	req      *signer.Request
}

// startApproverAct checks cmd's flags, reads the key file and then the
// transaction, refusing what could not be signed as the signer reads it.
// The caller clears priv.
func startApproverAct(x *env, cmd, arg, keyFile, approver string, ttl time.Duration) (*approverAct, error) {
	id, err := parseID(cmd, "transaction", arg)
	if err != nil {
		return nil, err
	}
	if keyFile == "" {
		return nil, usagef(cmd, "%s needs --key-file", cmd)
	}
	if ttl <= 0 || ttl > maxApprovalTTL {
		return nil, usagef(cmd, "--ttl %s: want more than 0 and at most %s", ttl, maxApprovalTTL)
	}
	keyID, priv, err := policy.ReadApproverKey(keyFile)
	if err != nil {
		return nil, usagef(cmd, "%v", err)
	}
	fail := func(err error) (*approverAct, error) {
		clear(priv)
		return nil, err
	}
	if approver == "" {
		approver = keyID
	} else if approver != keyID {
		return fail(usagef(cmd, "--approver %q, but the key file is approver %q's", approver, keyID))
	}
	tx, _, err := x.getTx(id)
	if err != nil {
		return fail(err)
	}
	if tx.State != components.StatePendingApproval {
		return fail(fmt.Errorf("transaction %s is %s: only a transaction waiting for approvals (PENDING_APPROVAL) can be %s", id, tx.State, map[string]string{"approve": "approved", "reject": "rejected"}[cmd]))
	}
	req, err := intentRequest(tx)
	if err != nil {
		return fail(fmt.Errorf("transaction %s: %w", id, err))
	}
	return &approverAct{id: id, approver: approver, priv: priv, tx: tx, req: req}, nil
}

// ask asks question unless yes, and returns an error unless the answer
// is yes: nothing is then signed or sent. The command's timeout bounds
// its requests, not a person reading, so after an answer x.ctx is a
// whole timeout again, until the caller calls release.
func (x *env) ask(yes bool, question string) (release func(), err error) {
	if yes {
		return func() {}, nil
	}
	ok, err := x.confirm(question)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("not confirmed: nothing was signed or sent")
	}
	if x.timeout <= 0 {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(x.base, x.timeout)
	x.ctx = ctx
	return cancel, nil
}

// maxAnswer bounds what is read of the answer: a yes is three bytes.
const maxAnswer = 256

// confirm asks question on standard error and reads one line of standard
// input: only y or yes, in any case, is a yes. No standard input, or its
// end before an answer, is an error that says so: a script that meant to
// sign without a person passes --yes instead.
func (x *env) confirm(question string) (bool, error) {
	fmt.Fprint(x.stderr, question)
	if x.stdin == nil {
		fmt.Fprintln(x.stderr)
		return false, errNoAnswer
	}
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	// A read of a terminal does not stop for a context: Ctrl-C must
	// still end the command, so the read runs on its own.
	go func() {
		line, err := bufio.NewReader(io.LimitReader(x.stdin, maxAnswer)).ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case <-x.base.Done():
		fmt.Fprintln(x.stderr)
		return false, x.base.Err()
	case a := <-got:
		if !terminal(x.stdin) {
			// A terminal echoes the answer's newline; piped input does not.
			fmt.Fprintln(x.stderr)
		}
		line := strings.TrimSpace(a.line)
		if a.err != nil && line == "" {
			if a.err == io.EOF {
				return false, errNoAnswer
			}
			return false, fmt.Errorf("read the answer: %w", a.err)
		}
		return strings.EqualFold(line, "y") || strings.EqualFold(line, "yes"), nil
	}
}

// terminal reports whether r is a terminal (a character device).
func terminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

var errNoAnswer = errors.New("no answer on standard input: nothing was signed or sent (--yes signs without asking)")

// showIntent prints what an approval of tx up to ceiling covers, or a
// rejection when ceiling is nil, read from req, the very request whose
// intent is signed, and not from the document again.
func showIntent(w io.Writer, tx *components.Tx, req *signer.Request, approver string, ceiling *big.Int, ttl time.Duration) error {
	fmt.Fprintf(w, "txctl: transaction %s waits for approvals. Read what you would sign:\n", req.TxID)
	var f fields
	f.add("chain_id", strconv.FormatUint(req.ChainID, 10))
	f.add("from", req.From.Hex())
	if req.To != nil {
		f.add("to", req.To.Hex())
	} else {
		f.add("to", "(contract creation)")
	}
	f.add("type", string(req.Type))
	f.add("value", req.Value.String()+" wei ("+decimalUnits(req.Value, 18)+" ether)")
	callRows(&f, req.To, req.Data)
	notSet := "not set: txmanager prices it when it allocates a nonce"
	f.add("max_fee_per_gas", orElse(feeText(tx.MaxFeePerGas, ""), notSet))
	if req.Type == signer.Legacy {
		f.add("max_priority_fee_per_gas", "none: a legacy transaction's tip is its gas price")
	} else {
		f.add("max_priority_fee_per_gas", orElse(feeText(tx.MaxPriorityFeePerGas, ""), notSet))
	}
	switch {
	case tx.GasLimit != nil:
		f.add("gas_limit", strconv.FormatInt(*tx.GasLimit, 10))
	case tx.Gas != nil:
		f.add("gas_limit", strconv.FormatInt(*tx.Gas, 10)+" (asked for; not fixed yet)")
	default:
		f.add("gas_limit", "not fixed yet")
	}
	if ceiling != nil {
		c := ceiling.String()
		f.add("approval_fee_ceiling", feeText(&c, " per gas")+": the highest fee cap (max_fee_per_gas, a legacy gas price) this approval covers")
		f.add("approval_valid_for", ttl.String()+" from your answer")
	} else {
		f.add("rejection_valid_for", ttl.String()+" from your answer")
	}
	f.add("approver", approver)
	f.add("intent", req.Intent().Hex())
	return f.write(w)
}

// callRows adds what data does, as the signer's policy reads it
// (policy.ReadCall), to f: the call, its arguments and its effect.
func callRows(f *fields, to *common.Address, data []byte) {
	switch {
	case to == nil:
		f.add("call", fmt.Sprintf("contract creation: %d bytes of init code, not decoded", len(data)))
		return
	case len(data) == 0:
		f.add("call", "none (a plain transfer of value)")
		return
	case len(data) < 4:
		f.add("call", fmt.Sprintf("%d bytes of call data, too short for a selector", len(data)))
		return
	}
	readings := policy.ReadCall(data)
	if len(readings) == 0 {
		f.add("call", fmt.Sprintf("selector 0x%x, %d bytes of call data: not a call the signer's policy decodes", data[:4], len(data)))
		return
	}
	if len(readings) > 1 {
		f.add("call", fmt.Sprintf("%d readings of one selector: the signer's policy takes that of the standard its policy file declares %s to be", len(readings), to.Hex()))
	}
	for _, r := range readings {
		name, what := "call", r.Signature
		switch {
		case r.Standard != "" && len(readings) > 1:
			name, what = "call as "+r.Standard, r.Signature+", token contract "+to.Hex()
		case r.Standard != "":
			what = r.Standard + " " + r.Signature + ", token contract " + to.Hex()
		default:
			what += ", an allowance-granting call"
		}
		if r.Err != nil {
			f.add(name, what+": malformed, the signer's policy refuses it as this call ("+r.Err.Error()+")")
			continue
		}
		f.add(name, what)
		for _, a := range r.Args {
			f.add("  "+a.Name, orElse(a.Value, `""`))
		}
		f.add("  effect", effectText(r.Effect))
	}
}

// effectText says what a call does with the signer's tokens, as the
// policy counts it.
func effectText(e *policy.CallEffect) string {
	party := e.Party.Hex()
	switch {
	case e.Kind == "moves":
		return "moves " + units(e.Amount) + " of the token to " + party
	case e.Kind == "grants" && e.Amount != nil:
		return "lets " + party + " spend " + units(e.Amount) + " of the signer's tokens"
	case e.Kind == "grants":
		return "gives " + party + " power over the signer's tokens, debt or positions (an allowance, operator, permit or delegation)"
	case e.Kind == "grants_all":
		return "makes " + party + " an operator of every unit of the token the signer holds, now and later"
	case e.Kind == "revokes" && e.Party == (common.Address{}):
		return "revokes the token's approval"
	case e.Kind == "revokes":
		return "revokes the allowance or operator approval of " + party
	}
	return e.Kind + " " + party
}

func units(n *big.Int) string {
	if n.Cmp(big.NewInt(1)) == 0 {
		return "1 unit"
	}
	return n.String() + " units"
}

// feeText is a fee in wei, and in gwei beside it; "" for none.
func feeText(wei *string, per string) string {
	if wei == nil {
		return ""
	}
	v := weiAmount(*wei)
	if v == nil {
		// Quoted: the gateway's text never reaches the terminal raw.
		return fmt.Sprintf("%q, not an amount of wei", *wei)
	}
	return *wei + " wei" + per + " (" + decimalUnits(v, 9) + " gwei)"
}

// decimalUnits writes v scaled down by 10^decimals, exactly: no float
// rounds a value a person is asked to approve.
func decimalUnits(v *big.Int, decimals int) string {
	s := v.String()
	if len(s) <= decimals {
		s = strings.Repeat("0", decimals-len(s)+1) + s
	}
	whole, frac := s[:len(s)-decimals], strings.TrimRight(s[len(s)-decimals:], "0")
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}

func orElse(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

var (
	hexAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	hexData    = regexp.MustCompile(`^0x([0-9a-fA-F]{2})*$`)
	decimal    = regexp.MustCompile(`^(0|[1-9][0-9]{0,77})$`)
)

// weiAmount parses a uint256 written as a decimal string without sign or
// leading zeros; nil if it is not one.
func weiAmount(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || !decimal.MatchString(s) || v.BitLen() > 256 {
		return nil
	}
	return v
}

// intentRequest is the signing request whose intent an approval of tx
// covers: what signerd rebuilds from txmanager's request. Anything that
// does not read exactly is refused rather than approved as something else.
func intentRequest(tx *components.Tx) (*signer.Request, error) {
	if !hexAddress.MatchString(tx.From) {
		return nil, fmt.Errorf("from %q is not an address", tx.From)
	}
	if tx.Type == nil || !tx.Type.Valid() {
		return nil, errors.New("the transaction carries no type (eip1559 or legacy): its chain is no longer in txmanager's configuration, and an approval could not name what signerd would sign")
	}
	req := &signer.Request{TxID: tx.TxId.String(), ChainID: uint64(tx.ChainId), From: common.HexToAddress(tx.From), Type: signer.TxType(*tx.Type)}
	if tx.ChainId <= 0 {
		return nil, fmt.Errorf("chain_id %d is not a chain id", tx.ChainId)
	}
	if tx.To != nil {
		if !hexAddress.MatchString(*tx.To) {
			return nil, fmt.Errorf("to %q is not an address", *tx.To)
		}
		to := common.HexToAddress(*tx.To)
		req.To = &to
	}
	value, ok := new(big.Int).SetString(tx.Value, 10)
	if !decimal.MatchString(tx.Value) || !ok || value.BitLen() > 256 {
		return nil, fmt.Errorf("value %q is not an amount of wei", tx.Value)
	}
	req.Value = value
	if !hexData.MatchString(tx.Data) {
		return nil, fmt.Errorf("data %q is not hex", tx.Data)
	}
	data, err := hex.DecodeString(strings.TrimPrefix(tx.Data, "0x"))
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	if len(data) > 0 {
		req.Data = data
	}
	return req, nil
}
