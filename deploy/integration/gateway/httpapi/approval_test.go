package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/remote"
)

// TestAnApprovalBelowTheFeeCapDoesNotCount: approvals travel gateway →
// txmanager (stored with their fee ceiling) → signerd, whose policy wants
// alice's approval for signer A. The transaction's own max_fee_per_gas of
// 50 gwei is its fee_ceiling. Approved through the gateway up to 20 gwei,
// the approval txmanager passes on counts at a fee cap of 20 gwei and not
// at 30; approved again up to the fee ceiling, it counts up to 50 gwei and
// not above. An approval without a ceiling is refused at the gateway,
// naming the field, and nothing reaches txmanager.
func TestAnApprovalBelowTheFeeCapDoesNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alice := signertest.ApproverKey("alice")
	policyFile := signertest.ApprovalPolicy{RuleID: "approved-payments", From: signerA,
		Approvers: map[string]ed25519.PublicKey{"alice": alice.Public().(ed25519.PublicKey)}}.Write(t)
	// txmanager checks each approval with a signerd of this policy when it
	// is submitted; the test asks another for the verdicts.
	g := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: policyFile})
	signerd := signertest.StartServer(t, signertest.ServerOptions{PKI: g.PKI, PolicyFile: policyFile,
		Wrap: func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.Signer, h) }})
	policy, err := remote.NewSigner(signerd.URL, servicetest.Client(t, g.PKI, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}

	body := strings.Replace(transfer(signerA, "1000"), `"route"`, `"max_fee_per_gas": "50000000000", "route"`, 1)
	resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx", body, "Idempotency-Key", "capped-payment")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	id := uuid.MustParse(decode[tx](t, b).TxID)
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signerA)}
	token, ok, err := g.TxM.Store.Acquire(ctx, "test-node", key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, err := g.TxM.Store.PendingApproval(ctx, txmanager.Fence{Node: "test-node", Key: key, Token: token}, id, 21000,
		time.Now().Add(time.Hour), txmanager.StateChanged{Rule: "approved-payments"}); err != nil {
		t.Fatal(err)
	}
	_, b = g.Do(t, g.Acme, "GET", "/api/v1/approvals", "")
	listed := decode[struct {
		Transactions []struct {
			TxID       string `json:"tx_id"`
			FeeCeiling string `json:"fee_ceiling"`
		}
	}](t, b).Transactions
	if len(listed) != 1 || listed[0].TxID != id.String() || listed[0].FeeCeiling != "50000000000" {
		t.Fatalf("pending approvals %s, want the transaction with fee_ceiling 50000000000", b)
	}

	to := common.HexToAddress(bob)
	intent := &signer.Request{TxID: id.String(), ChainID: 31337, From: common.HexToAddress(signerA), Type: signer.DynamicFee, To: &to, Value: big.NewInt(1000)}
	approve := func(ceiling *big.Int) {
		t.Helper()
		a := signer.SignApproval(alice, "alice", intent, ceiling, time.Now().Add(time.Hour))
		resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx/"+id.String()+"/approvals", fmt.Sprintf(`{"approver": "alice", "max_fee_per_gas": %q, "expiry": %q, "signature": %q}`,
			a.MaxFeePerGas.String(), a.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(a.Signature)))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("approve up to %s: %d %s", ceiling, resp.StatusCode, b)
		}
	}
	// decide asks signerd's policy, as the owner's worker does, about the
	// transaction at a fee cap of maxFee gwei with the approvals txmanager
	// stored.
	decide := func(maxFee int64) remote.Decision {
		t.Helper()
		stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id})
		if err != nil {
			t.Fatal(err)
		}
		waiting, err := g.TxM.Store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		d, err := policy.Evaluate(ctx, remote.ToSign{Tx: &waiting, GasLimit: 21000, Approvals: stored[id],
			Fees: txmanager.Fees{MaxFeePerGas: big.NewInt(maxFee * 1e9), MaxPriorityFeePerGas: big.NewInt(1e9)}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	check := func(maxFee int64, want remote.Verdict, reason string) {
		t.Helper()
		d := decide(maxFee)
		if d.Verdict != want || !strings.Contains(strings.Join(d.Reasons, "\n"), reason) {
			t.Errorf("at %d gwei: %s %q, want %s saying %q", maxFee, d.Verdict, d.Reasons, want, reason)
		}
	}

	// Without a ceiling, an approval is refused before txmanager sees it.
	resp, b = g.Do(t, g.Acme, "POST", "/api/v1/tx/"+id.String()+"/approvals", fmt.Sprintf(`{"approver": "alice", "expiry": %q, "signature": %q}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(make([]byte, 64))))
	if p := decode[problem](t, b); resp.StatusCode != http.StatusBadRequest || len(p.Errors) == 0 || p.Errors[0].Pointer != "/max_fee_per_gas" {
		t.Errorf("an approval without a fee ceiling: %d %s, want a 400 naming /max_fee_per_gas", resp.StatusCode, b)
	}
	check(30, remote.NeedsApproval, "needs 1 of 1 approvals")

	approve(big.NewInt(20e9))
	check(20, remote.Allow, "with the approvals of alice")
	check(30, remote.NeedsApproval, `the approval by "alice" covers fee caps up to 20000000000 wei per gas, below this request's 30000000000`)

	approve(big.NewInt(50e9)) // the fee ceiling: every attempt txmanager may sign
	check(30, remote.Allow, "with the approvals of alice")
	check(50, remote.Allow, "with the approvals of alice")
	check(51, remote.NeedsApproval, "covers fee caps up to 50000000000 wei per gas")
}
