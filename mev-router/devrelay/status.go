package devrelay

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/mev-router/flashbots"
)

var hashPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)

// serveStatus answers GET /tx/<hash> in Flashbots Protect's shape. Like
// Protect, it fills in the transaction's fields only once it is INCLUDED,
// and answers UNKNOWN (with 200) for a hash it never held.
func (r *Relay) serveStatus(w http.ResponseWriter, req *http.Request) {
	text := req.PathValue("hash")
	if !hashPattern.MatchString(text) {
		plainError(w, http.StatusBadRequest, "want /tx/<0x-prefixed 32-byte hex transaction hash>")
		return
	}
	hash := common.HexToHash(text)
	st := flashbots.Status{Status: flashbots.StateUnknown, Hash: hash}

	r.mu.Lock()
	if rec, ok := r.txs[hash]; ok {
		st.Status = rec.state
		st.MaxBlockNumber = rec.order.last
		st.FastMode = rec.fast
		st.SimError = rec.simError
		st.IsRevert = rec.reverted
		if rec.state == flashbots.StateIncluded {
			st.Transaction = statusTx(rec)
		}
	}
	r.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

func statusTx(rec *txRecord) flashbots.StatusTx {
	tx := rec.tx
	st := flashbots.StatusTx{
		From:                 rec.from.Hex(),
		GasLimit:             strconv.FormatUint(tx.Gas(), 10),
		MaxFeePerGas:         tx.GasFeeCap().String(),
		MaxPriorityFeePerGas: tx.GasTipCap().String(),
		Nonce:                strconv.FormatUint(tx.Nonce(), 10),
		Value:                tx.Value().String(),
	}
	if to := tx.To(); to != nil {
		st.To = to.Hex()
	}
	return st
}
