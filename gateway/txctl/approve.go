package txctl

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

func approvalCommands() []*command {
	return []*command{
		{name: "approvals", group: "Approvals", summary: "transactions waiting for approvals, newest first", define: defineApprovals},
		{name: "approve", group: "Approvals", summary: "sign an approval with an approver's key and post it",
			args: "ID --key-file PATH [--approver NAME] [--max-fee WEI] [--ttl 1h]", minArgs: 1, maxArgs: 1,
			about: `Reads the transaction, rebuilds from it the message docs/signer.md
("Approvals") defines, txfence/approval/v2: the intent (chain, sender,
type, destination, value, data), the tx id, the fee ceiling and the
expiry, signs it with the Ed25519 key of the key file and posts the
approval. The private key never leaves this machine. Read what is
printed: it is what was approved.

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
		{name: "reject", group: "Approvals", summary: "reject a transaction waiting for approvals (it FAILS)",
			args: "ID --approver NAME", minArgs: 1, maxArgs: 1, define: defineReject},
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
	fs.StringVar(&keyFile, "key-file", "", "`PATH` of the approver's key file, from 'signerctl approver new' (required)")
	fs.StringVar(&approver, "approver", "", "the approver's `NAME` in the policy (default: the key file's id)")
	fs.StringVar(&maxFee, "max-fee", "", "the fee ceiling, the highest fee cap per gas the approval covers, `WEI` (default: the transaction's fee_ceiling)")
	fs.DurationVar(&ttl, "ttl", time.Hour, "how long the approval counts, at most 720h; the policy's max_ttl may be shorter")
	return func(x *env, args []string) error {
		id, err := parseID("approve", "transaction", args[0])
		if err != nil {
			return err
		}
		if keyFile == "" {
			return usagef("approve", "approve needs --key-file")
		}
		if ttl <= 0 || ttl > maxApprovalTTL {
			return usagef("approve", "--ttl %s: want more than 0 and at most %s", ttl, maxApprovalTTL)
		}
		var ceiling *big.Int
		if given(fs)["max-fee"] {
			if ceiling = weiAmount(maxFee); ceiling == nil {
				return usagef("approve", "--max-fee %q: want a decimal amount of wei per gas", maxFee)
			}
		}
		keyID, priv, err := policy.ReadApproverKey(keyFile)
		if err != nil {
			return usagef("approve", "%v", err)
		}
		defer clear(priv)
		if approver == "" {
			approver = keyID
		} else if approver != keyID {
			return usagef("approve", "--approver %q, but the key file is approver %q's", approver, keyID)
		}

		tx, _, err := x.getTx(id)
		if err != nil {
			return err
		}
		if tx.State != components.StatePendingApproval {
			return fmt.Errorf("transaction %s is %s: only a transaction waiting for approvals (PENDING_APPROVAL) can be approved", id, tx.State)
		}
		req, err := intentRequest(tx)
		if err != nil {
			return fmt.Errorf("transaction %s: %w", id, err)
		}
		if ceiling == nil {
			if tx.FeeCeiling == nil {
				return usagef("approve", "transaction %s has no fee_ceiling (no max_fee_per_gas of its own, no cap configured for its signer): give the highest fee cap per gas to approve with --max-fee", id)
			}
			if ceiling = weiAmount(*tx.FeeCeiling); ceiling == nil {
				return fmt.Errorf("transaction %s: fee_ceiling %q is not an amount of wei", id, *tx.FeeCeiling)
			}
		}
		// Whole seconds: the message carries the expiry in Unix seconds.
		expiry := x.now().Add(ttl).Truncate(time.Second).UTC()
		a := signer.SignApproval(priv, approver, req, ceiling, expiry)
		resp, err := x.api.ApproveTxWithResponse(x.ctx, id, components.ApprovalRequest{Approver: a.Approver, MaxFeePerGas: a.MaxFeePerGas.String(),
			Expiry: a.Expiry, Signature: a.Signature})
		if err := x.check("approve transaction "+id.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		return printTx(x, resp.JSON200, resp.Body, func(f *fields) {
			f.add("approved_by", approver)
			f.add("approval_max_fee_per_gas", a.MaxFeePerGas.String()+" wei")
			f.add("approval_expiry", formatTime(a.Expiry))
			f.add("intent", req.Intent().Hex()+" ("+string(req.Type)+")")
			f.add("public_key", base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))
		})
	}
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

func defineReject(fs *flag.FlagSet) func(*env, []string) error {
	var approver string
	fs.StringVar(&approver, "approver", "", "the approver's `NAME` in the policy (required)")
	return func(x *env, args []string) error {
		id, err := parseID("reject", "transaction", args[0])
		if err != nil {
			return err
		}
		if approver == "" {
			return usagef("reject", "reject needs --approver")
		}
		resp, err := x.api.RejectTxWithResponse(x.ctx, id, components.RejectRequest{Approver: approver})
		if err := x.check("reject transaction "+id.String(), resp, err, http.StatusOK); err != nil {
			return err
		}
		return x.printTxResponse(resp.JSON200, resp.Body)
	}
}
