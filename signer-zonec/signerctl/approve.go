package signerctl

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// An approver's tooling. Approvers are people (or their own systems) who
// consent to one transaction intent at a time; their public keys are listed
// in the policy file and their private keys never come near signerd. These
// commands run on the approver's machine.

// approvalRequest is what an approver is asked to approve: the fields of a
// signing request that make up its intent (chain, sender, type,
// destination, value, data), the tx id, and the fee ceiling: the highest
// fee cap per gas the approval covers (max_fee_per_gas of an eip1559
// transaction, the gas price of a legacy one; the tip is at most the fee
// cap). Gas and the fees themselves are not part of an intent, so an
// approval survives a fee bump up to its ceiling; neither is the nonce,
// which may be given but changes nothing.
type approvalRequest struct {
	TxID         string  `json:"tx_id"`
	ChainID      uint64  `json:"chain_id"`
	From         string  `json:"from"`
	Type         string  `json:"type"`         // "legacy" or "eip1559"
	To           *string `json:"to,omitempty"` // absent: a contract creation
	Value        string  `json:"value"`        // wei, decimal
	Data         string  `json:"data,omitempty"`
	Nonce        *uint64 `json:"nonce,omitempty"`
	MaxFeePerGas *string `json:"max_fee_per_gas"` // wei per gas, decimal
}

// approvalJSON is an approval as the approver hands it over: attached to the
// transaction, it travels to signerd, which verifies it against the intent
// it recomputes.
// rejectionJSON is a rejection as the gateway's reject route takes it.
type rejectionJSON struct {
	Approver  string    `json:"approver"`
	Expiry    time.Time `json:"expiry"`    // RFC 3339, whole seconds
	Signature string    `json:"signature"` // base64 Ed25519 signature
}

type approvalJSON struct {
	Approver     string    `json:"approver"`
	MaxFeePerGas string    `json:"max_fee_per_gas"` // the fee ceiling, wei per gas
	Expiry       time.Time `json:"expiry"`          // RFC 3339, whole seconds
	Signature    string    `json:"signature"`       // base64 Ed25519 signature
}

// approval converts to the domain type.
func (a approvalJSON) approval() (signer.Approval, error) {
	sig, err := base64.StdEncoding.Strict().DecodeString(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return signer.Approval{}, errors.New("signature: not a base64 Ed25519 signature")
	}
	ceiling, ok := new(big.Int).SetString(a.MaxFeePerGas, 10)
	if !ok || !approvalAmount.MatchString(a.MaxFeePerGas) || ceiling.BitLen() > 256 {
		return signer.Approval{}, errors.New("max_fee_per_gas: not a decimal amount of wei")
	}
	return signer.Approval{Approver: a.Approver, MaxFeePerGas: ceiling, Expiry: a.Expiry, Signature: sig}, nil
}

// maxApprovalRequest bounds a request file: call data of a contract
// creation can be large, but not this large.
const maxApprovalRequest = 8 << 20

// maxApprovalTTL bounds --ttl: an approval is consent to one transaction
// soon, not a standing permission. The policy's max_ttl may be tighter.
const maxApprovalTTL = 30 * 24 * time.Hour

// approverCommand runs `signerctl approver new|sign`; args are the arguments
// after "approver".
//
//   - new --out FILE --id ID generates an Ed25519 key, writes it to FILE
//     (created, mode 0600, never overwritten) and prints the line to add to
//     the policy's approvers: "ID": "PUBLIC_KEY".
//   - sign --key FILE --request FILE|- [--ttl 1h] reads a signing request
//     (JSON: tx_id, chain_id, from, type, to, value, data, max_fee_per_gas,
//     nonce optional), recomputes its intent and prints the approval as
//     JSON: approver, max_fee_per_gas, expiry, signature.
//
// Abuse as an oracle: sign signs whatever intent and fee ceiling the
// request file describes, for as long as --ttl says; whoever can run it
// with the key file is the approver. It signs only the domain-separated approval message
// (signer.ApprovalMessage), so its signatures are good for nothing but
// approvals, and the approver must read the request before signing it.
func approverCommand(args []string, stdin io.Reader, stdout io.Writer) error {
	return approverCommandAt(args, stdin, stdout, time.Now)
}

func approverCommandAt(args []string, stdin io.Reader, stdout io.Writer, now func() time.Time) error {
	const usage = "usage: signerctl approver new --out FILE --id ID | sign --key FILE --request FILE|- [--ttl 1h] [--reject]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("signerctl approver "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch args[0] {
	case "new":
		out := fs.String("out", "", "the key file to create")
		id := fs.String("id", "", "the approver's id in the policy")
		if err := parseApproverFlags(fs, args[1:], usage); err != nil {
			return err
		}
		if *out == "" || *id == "" {
			return errors.New("approver new needs --out and --id; " + usage)
		}
		return newApproverKey(*out, *id, stdout)
	case "sign":
		keyPath := fs.String("key", "", "the approver's key file")
		reqPath := fs.String("request", "", "the signing request, a JSON file, or - for standard input")
		ttl := fs.Duration("ttl", time.Hour, "how long the approval is valid")
		reject := fs.Bool("reject", false, "sign a rejection of the transaction (txfence/rejection/v1) instead of an approval")
		if err := parseApproverFlags(fs, args[1:], usage); err != nil {
			return err
		}
		if *keyPath == "" || *reqPath == "" {
			return errors.New("approver sign needs --key and --request; " + usage)
		}
		if *ttl <= 0 || *ttl > maxApprovalTTL {
			return fmt.Errorf("--ttl %s: want more than 0 and at most %s", *ttl, maxApprovalTTL)
		}
		return signApproval(*keyPath, *reqPath, *ttl, *reject, stdin, stdout, now)
	}
	return fmt.Errorf("unknown approver command %q; %s", args[0], usage)
}

func parseApproverFlags(fs *flag.FlagSet, args []string, usage string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w; %s", fs.Name(), err, usage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %s; %s", fs.Name(), strings.Join(fs.Args(), " "), usage)
	}
	return nil
}

func newApproverKey(path, id string, stdout io.Writer) error {
	if !policy.ValidID(id) {
		return fmt.Errorf("--id %q: an approver id is 1 to 64 letters, digits, '.', '_', '-' or '@'", id)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generate an approver key: %w", err)
	}
	defer clear(priv)
	seed := priv.Seed()
	defer clear(seed)
	body, err := json.MarshalIndent(policy.ApproverKeyFile{
		Kind: policy.ApproverKeyKind, ID: id,
		Seed:      base64.StdEncoding.EncodeToString(seed),
		PublicKey: base64.StdEncoding.EncodeToString(pub),
	}, "", "  ")
	if err != nil {
		return err
	}
	defer clear(body)
	// O_EXCL: an existing key is never overwritten, so a slip of --out
	// cannot destroy an approver's key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create the approver key file: %w", err)
	}
	if _, err := f.Write(append(body, '\n')); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = fmt.Fprintf(stdout, "%q: %q\n", id, base64.StdEncoding.EncodeToString(pub))
	return err
}

// signApproval signs an approval of the request file, or with reject a
// rejection (no fee ceiling: a rejection fails the transaction whatever
// its fees), and prints it as the gateway takes it.
func signApproval(keyPath, reqPath string, ttl time.Duration, reject bool, stdin io.Reader, stdout io.Writer, now func() time.Time) error {
	var src io.Reader
	if reqPath == "-" {
		if stdin == nil {
			return errors.New("approver sign: no standard input")
		}
		src = stdin
	} else {
		f, err := os.Open(reqPath)
		if err != nil {
			return fmt.Errorf("signing request: %w", err)
		}
		defer f.Close()
		src = f
	}
	raw, err := io.ReadAll(io.LimitReader(src, maxApprovalRequest+1))
	if err != nil {
		return fmt.Errorf("read the signing request: %w", err)
	}
	if len(raw) > maxApprovalRequest {
		return fmt.Errorf("the signing request is more than %d bytes", maxApprovalRequest)
	}
	req, ceiling, err := parseApprovalRequest(raw, !reject)
	if err != nil {
		return fmt.Errorf("signing request: %w", err)
	}

	id, priv, err := policy.ReadApproverKey(keyPath)
	if err != nil {
		return err
	}
	defer clear(priv)
	// Whole seconds: the approval message carries the expiry in Unix
	// seconds, and RFC 3339 without fractions says exactly that.
	expiry := now().Add(ttl).Truncate(time.Second).UTC()
	if reject {
		r := signer.SignRejection(priv, id, req, expiry)
		out, err := json.Marshal(rejectionJSON{Approver: r.Approver, Expiry: r.Expiry, Signature: base64.StdEncoding.EncodeToString(r.Signature)})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	a := signer.SignApproval(priv, id, req, ceiling, expiry)
	out, err := json.Marshal(approvalJSON{Approver: a.Approver, MaxFeePerGas: a.MaxFeePerGas.String(), Expiry: a.Expiry,
		Signature: base64.StdEncoding.EncodeToString(a.Signature)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

var (
	approvalAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	approvalAmount  = regexp.MustCompile(`^(0|[1-9][0-9]{0,77})$`)
)

// parseApprovalRequest decodes a signing request strictly and builds the
// signer.Request whose intent is approved, and the fee ceiling. It refuses
// what it does not understand rather than approve something other than
// what was meant.
func parseApprovalRequest(raw []byte, needCeiling bool) (*signer.Request, *big.Int, error) {
	// Strict: the approver reads this file before signing it, so what the
	// approver reads must be what is signed (no duplicate keys, no field
	// names in another case, nothing after the object).
	var ar approvalRequest
	if err := policy.DecodeStrict(raw, &ar); err != nil {
		return nil, nil, err
	}
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	address := func(name, s string) common.Address {
		a := common.HexToAddress(s)
		if !approvalAddress.MatchString(s) || (s != strings.ToLower(s) && s != a.Hex()) {
			bad("%s %q: not an address (lowercase or EIP-55 checksummed)", name, s)
		}
		return a
	}
	req := &signer.Request{TxID: ar.TxID, ChainID: ar.ChainID, Type: signer.TxType(ar.Type)}
	if ar.TxID == "" {
		bad("tx_id is required")
	}
	if ar.ChainID == 0 {
		bad("chain_id is required")
	}
	req.From = address("from", ar.From)
	if req.Type != signer.Legacy && req.Type != signer.DynamicFee {
		bad("type %q: want legacy or eip1559", ar.Type)
	}
	if ar.To != nil {
		to := address("to", *ar.To)
		req.To = &to
	}
	if v, ok := new(big.Int).SetString(ar.Value, 10); !approvalAmount.MatchString(ar.Value) || !ok || v.BitLen() > 256 {
		bad("value %q: want a decimal amount of wei", ar.Value)
	} else {
		req.Value = v
	}
	var ceiling *big.Int
	switch v, ok := new(big.Int).SetString(deref(ar.MaxFeePerGas), 10); {
	case ar.MaxFeePerGas == nil && !needCeiling:
	case ar.MaxFeePerGas == nil:
		bad("max_fee_per_gas is required: the highest fee cap per gas (an eip1559 max_fee_per_gas, a legacy gas price) the approval covers")
	case !approvalAmount.MatchString(*ar.MaxFeePerGas) || !ok || v.BitLen() > 256:
		bad("max_fee_per_gas %q: want a decimal amount of wei per gas", *ar.MaxFeePerGas)
	default:
		ceiling = v
	}
	if ar.Data != "" {
		d, err := hex.DecodeString(strings.TrimPrefix(ar.Data, "0x"))
		if err != nil || !strings.HasPrefix(ar.Data, "0x") {
			bad("data: want 0x and an even number of hex digits")
		}
		req.Data = d
	}
	if req.To == nil && len(req.Data) == 0 {
		bad("a contract creation (no to) needs data")
	}
	return req, ceiling, errors.Join(problems...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
