package devrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// JSON-RPC 2.0 error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeNoMethod       = -32601
	codeInvalidParams  = -32602
	codeServer         = -32000
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// callError is a JSON-RPC error with the HTTP status to answer it with.
type callError struct {
	code   int
	status int
	msg    string
}

func (e *callError) Error() string { return e.msg }

func invalidParams(format string, args ...any) error {
	return &callError{code: codeInvalidParams, status: http.StatusOK, msg: fmt.Sprintf(format, args...)}
}

// nodeDown reports a failure to reach the node as 503, which clients
// treat as temporary.
func nodeDown(err error) error {
	return &callError{code: codeServer, status: http.StatusServiceUnavailable, msg: "node unavailable: " + err.Error()}
}

func (r *Relay) serveRPC(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRequest))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			plainError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", maxRequest))
			return
		}
		plainError(w, http.StatusBadRequest, "read request: "+err.Error())
		return
	}
	// The signature first, over the exact bytes received, as Flashbots
	// does: nothing about an unauthenticated request is looked at.
	signer, err := flashbots.Verify(req.Header.Get(flashbots.SignatureHeader), body)
	if err != nil {
		plainError(w, http.StatusForbidden, err.Error())
		return
	}
	if r.allowed != nil && !r.allowed[signer] {
		plainError(w, http.StatusForbidden, fmt.Sprintf("signer %s is not allowed by this relay", signer.Hex()))
		return
	}

	var call rpcRequest
	if err := json.Unmarshal(body, &call); err != nil {
		writeRPC(w, nil, nil, &callError{code: codeParse, status: http.StatusBadRequest, msg: "parse error: " + err.Error()})
		return
	}
	if call.JSONRPC != "2.0" || call.Method == "" {
		writeRPC(w, call.ID, nil, &callError{code: codeInvalidRequest, status: http.StatusBadRequest,
			msg: `invalid request: want "jsonrpc":"2.0" and a method (batches are not supported)`})
		return
	}
	log := r.log.With("method", call.Method, "signer", signer.Hex())
	var result any
	switch call.Method {
	case "eth_sendPrivateTransaction":
		result, err = r.sendPrivateTransaction(req.Context(), signer, call.Params)
	case "eth_cancelPrivateTransaction":
		result, err = r.cancelPrivateTransaction(signer, call.Params)
	case "mev_sendBundle":
		result, err = r.sendMevBundle(req.Context(), signer, call.Params)
	case "eth_sendBundle":
		result, err = r.sendEthBundle(req.Context(), signer, call.Params)
	default:
		err = &callError{code: codeNoMethod, status: http.StatusOK, msg: fmt.Sprintf(
			"method %s not found: the development relay serves eth_sendPrivateTransaction, eth_cancelPrivateTransaction, mev_sendBundle and eth_sendBundle", call.Method)}
	}
	if err != nil {
		log.Info("request refused", "err", err)
	}
	writeRPC(w, call.ID, result, err)
}

// param decodes the one object in params.
func param(params json.RawMessage, v any) error {
	var list []json.RawMessage
	if err := json.Unmarshal(params, &list); err != nil || len(list) != 1 {
		return invalidParams("invalid params: want an array holding one object")
	}
	if err := json.Unmarshal(list[0], v); err != nil {
		return invalidParams("invalid params: %v", err)
	}
	return nil
}

func (r *Relay) sendPrivateTransaction(ctx context.Context, signer common.Address, params json.RawMessage) (any, error) {
	var p flashbots.PrivateTxParams
	if err := param(params, &p); err != nil {
		return nil, err
	}
	tx, from, err := r.decodeTx(p.Tx)
	if err != nil {
		return nil, err
	}
	head, err := r.eth.BlockNumber(ctx)
	if err != nil {
		return nil, nodeDown(err)
	}
	last := uint64(p.MaxBlockNumber)
	switch {
	case last == 0 || last > head+DefaultBlocks:
		last = head + DefaultBlocks
	case last <= head:
		return nil, invalidParams("maxBlockNumber %d has passed: the chain is at block %d", last, head)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.txs[tx.Hash()]; ok && (rec.state == flashbots.StatePending || rec.state == flashbots.StateIncluded) {
		return tx.Hash(), nil // already held or mined: sending again changes nothing
	}
	o := &order{kind: privateTx, hash: tx.Hash(), first: head + 1, last: last, signer: signer}
	rec := &txRecord{tx: tx, raw: p.Tx, from: from, order: o, state: flashbots.StatePending,
		fast: p.Preferences != nil && p.Preferences.Fast}
	o.txs = []*txRecord{rec}
	r.txs[tx.Hash()] = rec
	r.pending = append(r.pending, o)
	r.log.Info("private transaction held", "tx_hash", tx.Hash(), "from", from, "nonce", tx.Nonce(),
		"max_block", last, "signer", signer.Hex())
	return tx.Hash(), nil
}

// cancelPrivateTransaction answers false, as Flashbots documents, for a
// transaction it does not hold as pending or that another identity sent.
func (r *Relay) cancelPrivateTransaction(signer common.Address, params json.RawMessage) (any, error) {
	var p flashbots.CancelPrivateTxParams
	if err := param(params, &p); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.txs[p.TxHash]
	switch {
	case !ok || rec.order.kind != privateTx || rec.state != flashbots.StatePending:
		return false, nil
	case rec.order.signer != signer:
		r.log.Info("cancel refused: sent by another signer", "tx_hash", p.TxHash, "sender_signer", rec.order.signer.Hex())
		return false, nil
	}
	rec.state = flashbots.StateCancelled
	r.finish(rec.order)
	r.log.Info("private transaction cancelled", "tx_hash", p.TxHash)
	return true, nil
}

func (r *Relay) sendMevBundle(ctx context.Context, signer common.Address, params json.RawMessage) (any, error) {
	var b flashbots.MevBundle
	if err := param(params, &b); err != nil {
		return nil, err
	}
	if err := b.Check(); err != nil {
		return nil, invalidParams("%v", err)
	}
	raws := make([][]byte, len(b.Body))
	for i, it := range b.Body {
		if len(it.Tx) == 0 {
			return nil, invalidParams("body[%d]: backrunning a pending transaction by hash is not supported by the development relay", i)
		}
		raws[i] = it.Tx
	}
	hash, err := b.Hash()
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	o := &order{kind: mevBundle, hash: hash, first: b.Inclusion.Block, last: b.Inclusion.Last(), signer: signer}
	if err := r.holdBundle(ctx, o, raws); err != nil {
		return nil, err
	}
	return map[string]common.Hash{"bundleHash": hash}, nil
}

func (r *Relay) sendEthBundle(ctx context.Context, signer common.Address, params json.RawMessage) (any, error) {
	var b flashbots.EthBundle
	if err := param(params, &b); err != nil {
		return nil, err
	}
	if err := b.Check(); err != nil {
		return nil, invalidParams("%v", err)
	}
	hash, err := b.Hash()
	if err != nil {
		return nil, invalidParams("%v", err)
	}
	o := &order{kind: ethBundle, hash: hash, first: b.BlockNumber, last: b.BlockNumber,
		minTime: b.MinTimestamp, maxTime: b.MaxTimestamp, signer: signer}
	if err := r.holdBundle(ctx, o, b.Txs); err != nil {
		return nil, err
	}
	return map[string]common.Hash{"bundleHash": hash}, nil
}

// holdBundle validates a bundle's transactions and window and keeps it.
func (r *Relay) holdBundle(ctx context.Context, o *order, raws [][]byte) error {
	recs := make([]*txRecord, len(raws))
	for i, raw := range raws {
		tx, from, err := r.decodeTx(raw)
		if err != nil {
			return invalidParams("transaction %d: %v", i, err)
		}
		recs[i] = &txRecord{tx: tx, raw: raw, from: from, order: o, state: flashbots.StatePending}
	}
	head, err := r.eth.BlockNumber(ctx)
	if err != nil {
		return nodeDown(err)
	}
	if o.last <= head {
		return invalidParams("the bundle's last block %d has passed: the chain is at block %d", o.last, head)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.bundles[o.hash]; ok && !old.done {
		return nil // the same bundle again, still held
	}
	for i, rec := range recs {
		if old, ok := r.txs[rec.tx.Hash()]; ok && (old.state == flashbots.StatePending || old.state == flashbots.StateIncluded) {
			return invalidParams("transaction %d (%s) is already %s in the relay", i, rec.tx.Hash(), old.state)
		}
	}
	o.txs = recs
	for _, rec := range recs {
		r.txs[rec.tx.Hash()] = rec
	}
	r.bundles[o.hash] = o
	r.pending = append(r.pending, o)
	r.log.Info("bundle held", "kind", o.kind, "bundle_hash", o.hash, "txs", len(recs),
		"first_block", o.first, "last_block", o.last, "signer", o.signer.Hex())
	return nil
}

// decodeTx reads a signed transaction and checks it is for this chain.
func (r *Relay) decodeTx(raw []byte) (*types.Transaction, common.Address, error) {
	if len(raw) == 0 {
		return nil, common.Address{}, invalidParams("empty transaction")
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return nil, common.Address{}, invalidParams("not a signed transaction (RLP or typed envelope): %v", err)
	}
	if tx.Type() == types.BlobTxType {
		return nil, common.Address{}, invalidParams("transaction %s: blob transactions are not supported by the development relay", tx.Hash())
	}
	if !tx.Protected() {
		return nil, common.Address{}, invalidParams("transaction %s has no chain id (not EIP-155 protected); this relay takes only chain %s", tx.Hash(), r.chainID)
	}
	if tx.ChainId().Cmp(r.chainID) != 0 {
		return nil, common.Address{}, invalidParams("transaction %s is for chain id %s, this relay's chain id is %s", tx.Hash(), tx.ChainId(), r.chainID)
	}
	from, err := types.Sender(r.signer, &tx)
	if err != nil {
		return nil, common.Address{}, invalidParams("transaction %s: invalid signature: %v", tx.Hash(), err)
	}
	return &tx, from, nil
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err error) {
	resp := rpcResponse{JSONRPC: "2.0", ID: id}
	status := http.StatusOK
	if len(bytes.TrimSpace(id)) == 0 {
		resp.ID = json.RawMessage("null")
	}
	if err == nil {
		b, mErr := json.Marshal(result)
		if mErr != nil {
			err = mErr
		} else {
			resp.Result = b
		}
	}
	if err != nil {
		var ce *callError
		if !errors.As(err, &ce) {
			ce = &callError{code: codeServer, status: http.StatusInternalServerError, msg: err.Error()}
		}
		resp.Error = &rpcError{Code: ce.code, Message: ce.msg}
		status = ce.status
	}
	writeJSON(w, status, resp)
}

// plainError answers in the shape Flashbots uses outside JSON-RPC.
func plainError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
