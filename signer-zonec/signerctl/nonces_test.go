package signerctl

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
)

// TestDeclaredStartNonceLetsAnAccountWithHistorySign: an account that
// already sent 5,000 transactions before signerd is refused at nonce 5000
// (far ahead of the 0 signerd knows); once the owner declares its start
// with signerctl nonces start, signerd signs there. The serving role
// cannot declare a start itself: a compromised signerd host could
// otherwise open the far future to itself.
func TestDeclaredStartNonceLetsAnAccountWithHistorySign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := signertest.MigratedDatabase(t)
	pol, err := policy.Load(signertest.DevelopmentPolicy())
	if err != nil {
		t.Fatal(err)
	}
	svc := &signer.Service{Keys: signertest.NewMemoryKeys(t, signertest.DevKeys...), Policy: pol, Store: postgres.New(db.ServePool(t))}
	from := signertest.DevAddress(0)
	signAt := func(nonce uint64) signer.Result {
		t.Helper()
		to := signertest.DevAddress(1)
		res, err := svc.Sign(ctx, "txmanager", []*signer.Request{{TxID: "history", ChainID: 31337, From: from,
			Nonce: nonce, Type: signer.DynamicFee, To: &to, Value: big.NewInt(1), Gas: 21000,
			MaxFeePerGas: big.NewInt(30_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_000_000_000)}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	run := func(env map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		err := Run(ctx, append([]string{"nonces"}, args...), func(k string) string { return env[k] }, nil, &out)
		return out.String(), err
	}
	owner := map[string]string{"TXFENCE_SIGNER_OWNER_DATABASE_URL": db.OwnerURL}
	serving := map[string]string{"TXFENCE_SIGNER_DATABASE_URL": db.ServeURL}
	start := []string{"start", "--chain-id", "31337", "--signer", strings.ToLower(from.Hex()), "--nonce", "5000"}

	if r := signAt(5000); r.Outcome != signer.OutcomeRefused || r.Refusal.Rule != signer.RuleNonceAhead {
		t.Fatalf("nonce 5000 before the start is declared: %s (%+v); want refused by %s", r.Outcome, r.Refusal, signer.RuleNonceAhead)
	}
	if _, err := run(serving, start...); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the serving role declared a start nonce: %v; want the database to refuse it", err)
	}
	out, err := run(owner, start...)
	if err != nil || !strings.Contains(out, "next nonce 5000 (was none)") {
		t.Fatalf("nonces start as the owner: %v\n%s", err, out)
	}
	if r := signAt(5000); r.Outcome != signer.OutcomeSigned {
		t.Fatalf("nonce 5000 after the start is declared: %s (%+v); want it signed", r.Outcome, r.Refusal)
	}
	if out, err := run(owner, append(start[:len(start)-1], "5001")...); err != nil || !strings.Contains(out, "(was 5000)") {
		t.Errorf("a second declaration: %v\n%s; want it to name the one it replaced", err, out)
	}
	out, err = run(serving, "list", "--json")
	var listed []postgres.NonceStart
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].Nonce != 5001 || listed[0].Signer != from {
		t.Errorf("nonces list as the serving role: %v\n%s; want the one declaration at 5001", err, out)
	}
}

func TestNoncesStartRefusesBadUse(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "postgres://unused" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nonces"}, "usage: signerctl nonces"},
		{[]string{"nonces", "start"}, "needs [--chain-id --nonce --signer]"},
		{[]string{"nonces", "start", "--chain-id", "1", "--signer", "0x12", "--nonce", "1"}, `"0x12" is not an address`},
		{[]string{"nonces", "start", "--chain-id", "-1"}, "is not a number"},
		{[]string{"nonces", "start", "--chain-id", "1", "--signer", "0x0000000000000000000000000000000000000001", "--nonce", "9223372036854775808"}, "is not a number"},
		{[]string{"nonces", "list", "extra"}, "unexpected"},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), tc.args, env, nil, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("signerctl %v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}
