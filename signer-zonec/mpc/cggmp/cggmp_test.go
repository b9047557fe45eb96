package cggmp

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// TestTwoOfThree runs one key generation (the slow part) and every check
// that needs a key on it.
func TestTwoOfThree(t *testing.T) {
	shares := keygen(t)
	addr := shares[1].Address()
	for _, p := range all {
		if got := shares[p].Address(); got != addr {
			t.Fatalf("%s's address %s, %s's %s", p, got, mpc.PartyID(1), addr)
		}
	}

	t.Run("every pair signs transactions that recover to the address", func(t *testing.T) {
		to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
		legacy := func(chain int64) *types.Transaction {
			return types.NewTx(&types.LegacyTx{Nonce: 7, GasPrice: big.NewInt(2e9), Gas: 21000, To: &to, Value: big.NewInt(1)})
		}
		dynamic := func(chain int64) *types.Transaction {
			return types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(chain), Nonce: 7, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(3e9), Gas: 21000, To: &to, Value: big.NewInt(1)})
		}
		for _, c := range []struct {
			name    string
			signers []mpc.PartyID
			chain   int64
			tx      func(int64) *types.Transaction
		}{
			{"legacy chain 1 by 1,2", []mpc.PartyID{1, 2}, 1, legacy},
			{"legacy chain 31337 by 1,3", []mpc.PartyID{1, 3}, 31337, legacy},
			{"EIP-1559 chain 1 by 2,3", []mpc.PartyID{2, 3}, 1, dynamic},
			{"EIP-1559 chain 31337 by 1,2", []mpc.PartyID{1, 2}, 31337, dynamic},
		} {
			signer := types.LatestSignerForChainID(big.NewInt(c.chain))
			tx := c.tx(c.chain)
			sigs, errs := signWith(t, &router{t: t}, []*Share{shares[c.signers[0]], shares[c.signers[1]]}, signer.Hash(tx))
			mustOK(t, c.name, errs)
			for p, sig := range sigs {
				signed, err := tx.WithSignature(signer, sig)
				if err != nil {
					t.Fatalf("%s: %s: %v", c.name, p, err)
				}
				from, err := types.Sender(signer, signed)
				if err != nil || from != addr {
					t.Errorf("%s: %s's signature: sender %s, %v; want %s", c.name, p, from, err, addr)
				}
			}
		}
	})

	t.Run("one party alone cannot sign", func(t *testing.T) {
		if _, err := NewSign(newSession(t), shares[1], []mpc.PartyID{1}, [32]byte{1}); err == nil {
			t.Fatal("a signing by one party was prepared")
		}
	})

	t.Run("replays and other sessions' messages are refused, the run still signs", func(t *testing.T) {
		rt := &router{t: t}
		var other mpc.SessionID
		other[0] = 0xff
		rt.tamper = func(env mpc.Envelope) []mpc.Envelope {
			foreign := env
			foreign.Session = other
			return []mpc.Envelope{env, env, foreign}
		}
		_, errs := signWith(t, rt, []*Share{shares[2], shares[3]}, [32]byte{2})
		mustOK(t, "sign", errs)
		var replays, foreign int
		for _, err := range rt.refusals() {
			switch {
			case errors.Is(err, mpc.ErrReplay):
				replays++
			case errors.Is(err, mpc.ErrOtherSession):
				foreign++
			default:
				t.Errorf("unexpected refusal: %v", err)
			}
		}
		if replays == 0 || foreign == 0 {
			t.Errorf("refused %d replays and %d foreign messages, want some of each", replays, foreign)
		}
	})

	t.Run("a corrupted message aborts the run and names its sender", func(t *testing.T) {
		rt := &router{t: t}
		rt.tamper = func(env mpc.Envelope) []mpc.Envelope {
			if env.From == 3 && env.Round == 2 {
				env.Payload = env.Payload[:len(env.Payload)-3]
			}
			return []mpc.Envelope{env}
		}
		_, errs := signWith(t, rt, []*Share{shares[1], shares[3]}, [32]byte{3})
		var abort *mpc.AbortError
		if !errors.As(errs[1], &abort) || abort.Party != 3 {
			t.Fatalf("party 1: %v, want an abort naming party 3", errs[1])
		}
	})

	t.Run("refresh keeps the address; old and new shares do not combine", func(t *testing.T) {
		fresh := refreshAll(t, shares)
		for _, p := range all {
			if got := fresh[p].Address(); got != addr {
				t.Fatalf("%s's address after refresh %s, want %s", p, got, addr)
			}
		}
		_, errs := signWith(t, &router{t: t}, []*Share{fresh[1], fresh[3]}, [32]byte{4})
		mustOK(t, "sign with refreshed shares", errs)
		sigs, errs := signWith(t, &router{t: t}, []*Share{shares[1], fresh[2]}, [32]byte{5})
		if errs[1] == nil && errs[2] == nil {
			t.Fatalf("an old and a new share signed together: %x", sigs[1])
		}
	})
}
