package cggmp

import (
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/getamis/alice/crypto/birkhoffinterpolation"
	pt "github.com/getamis/alice/crypto/ecpointgrouplaw"
	"github.com/getamis/alice/crypto/elliptic"
	"github.com/getamis/alice/crypto/homo/paillier"
	zkpaillier "github.com/getamis/alice/crypto/zkproof/paillier"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// paillierBits is the size of each party's Paillier modulus, the smallest
// alice accepts.
const paillierBits = 2048

var curve = elliptic.Secp256k1()

// Share is one party's share of a threshold key and what it knows of the
// other parties' public material. It is usable for signing once a Refresh
// has given it a Paillier key; a key generation alone does not. It is never
// logged and not comparable.
type Share struct {
	_         [0]func()
	party     mpc.PartyID
	parties   []mpc.PartyID
	threshold uint32
	pub       *pt.ECPoint
	secret    *big.Int
	rid       []byte
	bks       map[string]*birkhoffinterpolation.BkParameter
	partial   map[string]*pt.ECPoint                        // each party's secret·G
	paillier  *paillier.Paillier                            // nil before the first Refresh
	ped       map[string]*zkpaillier.PederssenOpenParameter // each party's ring-Pedersen parameters
}

// Party is the share's holder.
func (s *Share) Party() mpc.PartyID { return s.party }

// Threshold is how many parties it takes to sign.
func (s *Share) Threshold() uint32 { return s.threshold }

// PublicKey is the joint public key.
func (s *Share) PublicKey() *ecdsa.PublicKey { return ethPub(s.pub) }

// Address is the Ethereum address of the joint public key.
func (s *Share) Address() common.Address { return crypto.PubkeyToAddress(*s.PublicKey()) }

// LogValue keeps the share out of logs.
func (s *Share) LogValue() slog.Value { return slog.StringValue("[redacted]") }

func ethPub(p *pt.ECPoint) *ecdsa.PublicKey {
	b := make([]byte, 65)
	b[0] = 4
	p.GetX().FillBytes(b[1:33])
	p.GetY().FillBytes(b[33:])
	pub, err := crypto.UnmarshalPubkey(b)
	if err != nil {
		panic(fmt.Sprintf("cggmp: a point of the curve is not a public key: %v", err)) // alice's points are on the curve
	}
	return pub
}

// checkPartials: the parties' partial public keys lie on one polynomial whose
// value at 0 is the joint key, so every set of threshold parties
// interpolates them to it. A party that announced a wrong partial key fails
// this before any refresh or signature relies on it.
func checkPartials(threshold uint32, parties []mpc.PartyID, bks map[string]*birkhoffinterpolation.BkParameter, partial map[string]*pt.ECPoint, pub *pt.ECPoint) error {
	for _, set := range subsets(parties, int(threshold)) {
		params := make(birkhoffinterpolation.BkParameters, len(set))
		for i, p := range set {
			params[i] = bks[partyString(p)]
		}
		coef, err := params.ComputeBkCoefficient(threshold, curve.Params().N)
		if err != nil {
			return fmt.Errorf("interpolate %v: %w", set, err)
		}
		var sum *pt.ECPoint
		for i, p := range set {
			term := partial[partyString(p)].ScalarMult(coef[i])
			if sum == nil {
				sum = term
				continue
			}
			if sum, err = sum.Add(term); err != nil {
				return fmt.Errorf("interpolate %v: %w", set, err)
			}
		}
		if !sum.Equal(pub) {
			return fmt.Errorf("parties %v: partial public keys do not make the joint key", set)
		}
	}
	return nil
}

func subsets(parties []mpc.PartyID, k int) [][]mpc.PartyID {
	if k == 0 {
		return [][]mpc.PartyID{nil}
	}
	var out [][]mpc.PartyID
	for i := 0; i+k <= len(parties); i++ {
		for _, rest := range subsets(parties[i+1:], k-1) {
			out = append(out, append([]mpc.PartyID{parties[i]}, rest...))
		}
	}
	return out
}

func pick[V any](m map[string]V, parties []mpc.PartyID) map[string]V {
	out := make(map[string]V, len(parties))
	for _, p := range parties {
		out[partyString(p)] = m[partyString(p)]
	}
	return out
}

func checkParties(self mpc.PartyID, parties []mpc.PartyID) error {
	if !slices.Contains(parties, self) {
		return fmt.Errorf("cggmp: %s is not among the parties %v", self, parties)
	}
	seen := map[mpc.PartyID]bool{}
	for _, p := range parties {
		if p == 0 || seen[p] {
			return fmt.Errorf("cggmp: parties %v: zero or repeated", parties)
		}
		seen[p] = true
	}
	return nil
}
