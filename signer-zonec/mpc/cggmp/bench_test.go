package cggmp

import (
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/txfence/txfence/signer-zonec/mpc"
)

// Benchmarks of a 2-of-3 key, all parties in one process (so the figures add
// the parties' work on this machine's cores, without network latency):
//
//	go test -run '^$' -bench . -benchtime 3x ./cggmp/
//
// alice's CGGMP signing has no separate presigning phase, so there is no
// online-only figure: BenchmarkSign is the full four-round signing.

func BenchmarkKeygen(b *testing.B) {
	for b.Loop() {
		session := newSession(b)
		protos := map[mpc.PartyID]mpc.Protocol{}
		for _, p := range all {
			k, err := NewKeygen(session, p, all, 2)
			if err != nil {
				b.Fatal(err)
			}
			protos[p] = k
		}
		mustOK(b, "keygen", (&router{t: b}).runAll(session, protos))
	}
}

func BenchmarkRefresh(b *testing.B) {
	shares := keygen(b)
	for b.Loop() {
		shares = refreshAll(b, shares)
	}
}

func BenchmarkSign(b *testing.B) {
	shares := keygen(b)
	for b.Loop() {
		_, errs := signWith(b, &router{t: b}, []*Share{shares[1], shares[2]}, [32]byte{9})
		mustOK(b, "sign", errs)
	}
}

// BenchmarkSingleKeySign is the anchor BenchmarkSign is read against, in
// the same run: one secp256k1 signature of a digest with the whole key in
// one place (go-ethereum's crypto.Sign), what signerd's Vault backend does
// per signature once it holds the key.
func BenchmarkSingleKeySign(b *testing.B) {
	key, err := crypto.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	digest := crypto.Keccak256([]byte("anchor"))
	for b.Loop() {
		if _, err := crypto.Sign(digest, key); err != nil {
			b.Fatal(err)
		}
	}
}
