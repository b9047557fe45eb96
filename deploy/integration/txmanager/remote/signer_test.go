package remote_test

import (
	"context"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/remote"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// signerd is a real signerd API (development policy, anvil's keys) and a
// client of it as txmanager; every exchange is checked against signer.yaml.
func signerd(t *testing.T) *remote.Signer {
	t.Helper()
	pki := servicetest.PKI(t)
	srv := signertest.StartServer(t, signertest.ServerOptions{PKI: pki,
		Wrap: func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.Signer, h) }})
	c, err := remote.NewSigner(srv.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func transfer(chainID uint64, value int64) *txmanager.Tx {
	to := signertest.DevAddress(1)
	return &txmanager.Tx{ID: uuid.Must(uuid.NewV7()), Intent: txmanager.Intent{ChainID: chainID, From: signertest.DevAddress(0),
		To: &to, Value: big.NewInt(value), Route: txmanager.RoutePublic}}
}

var fees = remote.Fees{MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9)}

func TestEvaluateBeforeANonce(t *testing.T) {
	t.Parallel()
	s := signerd(t)
	d, err := s.Evaluate(ctx(t), remote.ToSign{Tx: transfer(31337, 1000), GasLimit: 21000, Fees: fees})
	if err != nil || d.Verdict != remote.Allow || d.RuleID != "anvil-calls" {
		t.Fatalf("evaluate: %+v %v", d, err)
	}
	d, err = s.Evaluate(ctx(t), remote.ToSign{Tx: transfer(1, 1000), GasLimit: 21000, Fees: fees})
	if err != nil || d.Verdict != remote.Deny || d.RuleID != "chain-allowlist" || len(d.Reasons) == 0 {
		t.Errorf("evaluate on another chain: %+v %v", d, err)
	}
}

func TestSignABatchAndReplayIt(t *testing.T) {
	t.Parallel()
	s := signerd(t)
	var batch []remote.ToSign
	for i := range 3 {
		n := uint64(i)
		batch = append(batch, remote.ToSign{Tx: transfer(31337, int64(100+i)), Nonce: &n, GasLimit: 21000, Fees: fees})
	}
	legacy := uint64(3)
	batch = append(batch, remote.ToSign{Tx: transfer(31337, 5), Nonce: &legacy, GasLimit: 21000, Fees: remote.Fees{GasPrice: big.NewInt(2e9)}})
	got, err := s.SignBatch(ctx(t), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Outcome != remote.OutcomeSigned || r.TxID != batch[i].Tx.ID {
			t.Fatalf("result %d: %+v", i, r)
		}
		var tx types.Transaction
		if err := tx.UnmarshalBinary(r.RawTx); err != nil {
			t.Fatal(err)
		}
		from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(31337)), &tx)
		if err != nil || from != signertest.DevAddress(0) || tx.Hash() != r.Hash || tx.Nonce() != uint64(i) {
			t.Errorf("result %d: sender %s (%v), hash %s vs %s, nonce %d", i, from, err, tx.Hash(), r.Hash, tx.Nonce())
		}
	}
	if tx := new(types.Transaction); tx.UnmarshalBinary(got[3].RawTx) != nil || tx.Type() != types.LegacyTxType {
		t.Error("the gas-price request was not signed as a legacy transaction")
	}
	// The same batch again (a crash after signing, before storing): the
	// same signatures.
	again, err := s.SignBatch(ctx(t), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if again[i].Outcome != remote.OutcomeReplayed || again[i].Hash != got[i].Hash {
			t.Errorf("replay %d: %+v, want the hash %s replayed", i, again[i], got[i].Hash)
		}
	}
}

func TestAKeySignerdDoesNotHoldIsInvalid(t *testing.T) {
	t.Parallel()
	s := signerd(t)
	tx := transfer(31337, 1)
	tx.From = signertest.DevAddress(2)
	tx.From[0] ^= 0xff
	n := uint64(0)
	_, err := s.SignBatch(ctx(t), []remote.ToSign{{Tx: tx, Nonce: &n, GasLimit: 21000, Fees: fees}})
	if errs.KindOf(err) != errs.Invalid {
		t.Errorf("sign for a key signerd lacks: %v, want invalid", err)
	}
}
