package signer_test

import (
	"crypto/ecdsa"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/ethtx"
)

// recordedRow is a row of the double-sign record with its audit record.
type recordedRow struct {
	s   signer.RecordedSignature
	rec *signer.AuditEntry
}

// TestCheckRecordedSignatureReadsTheRawTransaction: audit verification
// decodes each recorded raw transaction and refuses one that another key
// signed, one that is another transaction, and one signerd never signs,
// even when the row's tx_hash and its audit record were made to match.
func TestCheckRecordedSignatureReadsTheRawTransaction(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := transfer("tx-1", 1000, gwei(30), gwei(1))
	r.From = crypto.PubkeyToAddress(key.PublicKey)
	// recorded is raw recorded as the signature of r.
	recorded := func(raw []byte, hash common.Hash) recordedRow {
		s := signer.RecordedSignature{Signed: signer.Signed{ChainID: r.ChainID, From: r.From, Nonce: r.Nonce, TxID: r.TxID,
			Intent: r.Intent(), Digest: r.Digest(), FeeCap: r.FeeCap(), TipCap: r.TipCap(), Gas: r.Gas, Value: r.Value,
			TxHash: hash, RawTx: raw}, Attempt: 1, AuditSeq: 7}
		rec := &signer.AuditEntry{Seq: 7, Outcome: signer.OutcomeSigned, ChainID: r.ChainID, From: r.From, Nonce: r.Nonce,
			TxID: r.TxID, RequestDigest: r.Digest(), TxHash: &hash}
		return recordedRow{s, rec}
	}
	sign := func(tx ethtx.Tx, by *ecdsa.PrivateKey) recordedRow {
		signed, err := tx.Sign(by)
		if err != nil {
			t.Fatal(err)
		}
		return recorded(signed.Raw(), signed.Hash())
	}

	good := sign(r.Transaction(), key)
	if err := signer.CheckRecordedSignature(good.s, good.rec); err != nil {
		t.Fatalf("the request's own signature: %v", err)
	}
	otherNonce := r.Transaction()
	otherNonce.Nonce++
	legacy := r.Transaction()
	legacy.Type, legacy.GasPrice, legacy.MaxFeePerGas, legacy.MaxPriorityFeePerGas = ethtx.Legacy, legacy.MaxFeePerGas, nil, nil
	for name, c := range map[string]struct {
		row  recordedRow
		want string
	}{
		"another key":   {sign(r.Transaction(), other), "signer differs"},
		"another nonce": {sign(otherNonce, key), "nonce differs"},
		// A legacy transaction's tip is its gas price.
		"legacy at the fee cap": {sign(legacy, key), "tip_cap differs"},
		"access list type":      {recorded([]byte{0x01, 0xc0}, common.Hash{1}), "does not decode"},
	} {
		err := signer.CheckRecordedSignature(c.row.s, c.row.rec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}
