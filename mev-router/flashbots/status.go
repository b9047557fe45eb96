package flashbots

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// State is a private transaction's state in the status API.
type State string

// The states Flashbots Protect documents.
const (
	StatePending   State = "PENDING"   // received, offered to builders
	StateIncluded  State = "INCLUDED"  // included on chain
	StateFailed    State = "FAILED"    // not included before its last block
	StateCancelled State = "CANCELLED" // cancelled by its sender, not included
	StateUnknown   State = "UNKNOWN"   // never received
)

// Status is the answer of the status API (GET /tx/<hash>), in Flashbots
// Protect's shape.
type Status struct {
	Status         State       `json:"status"`
	Hash           common.Hash `json:"hash"`
	MaxBlockNumber uint64      `json:"maxBlockNumber"`
	// Transaction is filled in for INCLUDED only: Protect keeps pending,
	// failed and cancelled trades private.
	Transaction   StatusTx `json:"transaction"`
	FastMode      bool     `json:"fastMode"`
	SeenInMempool bool     `json:"seenInMempool"`
	SimError      string   `json:"simError,omitempty"`
	RevertReason  string   `json:"revertReason,omitempty"`
	IsRevert      bool     `json:"isRevert,omitempty"`
}

// StatusTx are a transaction's fields as the status API reports them:
// decimal strings (addresses in hex), empty unless INCLUDED.
type StatusTx struct {
	From                 string `json:"from"`
	To                   string `json:"to"`
	GasLimit             string `json:"gasLimit"`
	MaxFeePerGas         string `json:"maxFeePerGas"`
	MaxPriorityFeePerGas string `json:"maxPriorityFeePerGas"`
	Nonce                string `json:"nonce"`
	Value                string `json:"value"`
}

// UnmarshalJSON is lenient where the documentation leaves room: hash may
// be empty, and maxBlockNumber a JSON number (as documented) or a string
// holding a hex or decimal number.
func (s *Status) UnmarshalJSON(b []byte) error {
	type plain Status
	var j struct {
		plain
		Hash           string          `json:"hash"`
		MaxBlockNumber json.RawMessage `json:"maxBlockNumber"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Status(j.plain)
	s.Hash = common.Hash{}
	if j.Hash != "" {
		if err := s.Hash.UnmarshalText([]byte(j.Hash)); err != nil {
			return fmt.Errorf("status hash %q: %w", clip(j.Hash), err)
		}
	}
	n, err := blockNumber(j.MaxBlockNumber)
	if err != nil {
		return fmt.Errorf("status maxBlockNumber %s: %w", clip(string(j.MaxBlockNumber)), err)
	}
	s.MaxBlockNumber = n
	return nil
}

func blockNumber(raw json.RawMessage) (uint64, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		var n uint64
		err := json.Unmarshal(raw, &n)
		return n, err
	}
	if text == "" {
		return 0, nil
	}
	if strings.HasPrefix(text, "0x") {
		return hexutil.DecodeUint64(text)
	}
	return strconv.ParseUint(text, 10, 64)
}

// TxStatus asks the status API about a private transaction. A transaction
// the relay never received is StateUnknown, not an error. The status API
// is public, so the request is not signed.
func (c *Client) TxStatus(ctx context.Context, hash common.Hash) (Status, error) {
	const method = "GET /tx"
	base := c.StatusURL
	if base == "" {
		base = c.URL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/tx/"+hash.Hex(), nil)
	if err != nil {
		return Status{}, fmt.Errorf("status of %s at %s: %w", hash, redact(base), err)
	}
	req.Header.Set("Accept", "application/json")
	code, payload, err := c.do(req, method)
	if err != nil {
		return Status{}, err
	}
	if code != http.StatusOK {
		var plain struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(payload, &plain) == nil && len(plain.Error) > 0 {
			return Status{}, answerError(base, method, code, plain.Error)
		}
		return Status{}, refusal(base, method, code, payload)
	}
	var st Status
	if err := json.Unmarshal(payload, &st); err != nil {
		return Status{}, malformed(base, method, code, "answer is not a status: "+err.Error())
	}
	if st.Status == "" {
		return Status{}, malformed(base, method, code, "answer has no status")
	}
	return st, nil
}
