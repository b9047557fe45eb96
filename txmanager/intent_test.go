package txmanager_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
)

func transfer() *txmanager.Intent {
	to := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	return &txmanager.Intent{ChainID: 31337, From: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"), RequestID: "order-1", To: &to,
		Value: big.NewInt(1000), Route: txmanager.RoutePublic, Metadata: json.RawMessage(`{"transit_id": "move-1"}`)}
}

// TestTheHashTakesTheParentsAsASet: one set of parents in any order is one
// intent, another set another; and an intent with no parent or one hashes
// as it did when a transaction had one parent at most (the values below
// are that code's), so a request accepted then and repeated now is still
// the same request, not a conflict.
func TestTheHashTakesTheParentsAsASet(t *testing.T) {
	t.Parallel()
	hash := func(parents ...uuid.UUID) string {
		in := transfer()
		in.DependsOn = parents
		h := in.Hash()
		return hex.EncodeToString(h[:])
	}
	p, q, r := uuid.MustParse("0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7"), uuid.New(), uuid.New()
	for name, tc := range map[string]struct{ got, want string }{
		"no parent, as before":  {hash(), "850c224ab8a30d55e6412fc39bbb96f96df471e3d0aad2227d8f7a96e150c58c"},
		"one parent, as before": {hash(p), "fccafa442a0a73665a847eb1fe65a106b98b0c6f0bf08495a9fe7e7826f16a7c"},
		"a set in two orders":   {hash(r, p, q), hash(q, r, p)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", name, tc.got, tc.want)
		}
	}
	seen := map[string]string{}
	for name, h := range map[string]string{"none": hash(), "p": hash(p), "q": hash(q), "p q": hash(p, q), "p q r": hash(p, q, r), "q r": hash(q, r)} {
		if other, ok := seen[h]; ok {
			t.Errorf("%s and %s hash alike", name, other)
		}
		seen[h] = name
	}
}

// TestValidateNamesEachBadParent: a repeated parent and more than
// dependson.Max are invalid, each named by its JSON pointer.
func TestValidateNamesEachBadParent(t *testing.T) {
	t.Parallel()
	p, q := uuid.New(), uuid.New()
	in := transfer()
	in.DependsOn = dependson.List{p, q, p, q}
	err := txmanager.Invalid(in.Validate())
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 2 || e.Fields[0].Pointer != "/depends_on/2" || e.Fields[1].Pointer != "/depends_on/3" {
		t.Errorf("repeated parents: %#v", err)
	}
	in.DependsOn = make(dependson.List, dependson.Max+1)
	for i := range in.DependsOn {
		in.DependsOn[i] = uuid.New()
	}
	if err := txmanager.Invalid(in.Validate()); !errors.As(err, &e) || len(e.Fields) != 1 || e.Fields[0].Pointer != "/depends_on" {
		t.Errorf("%d parents: %#v", len(in.DependsOn), err)
	}
	in.DependsOn = in.DependsOn[:dependson.Max]
	if err := in.Validate(); err != nil {
		t.Errorf("%d parents: %v", dependson.Max, err)
	}
}
