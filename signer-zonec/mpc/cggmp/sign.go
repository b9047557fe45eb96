package cggmp

import (
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/getamis/alice/crypto/tss/ecdsa/cggmp"
	"github.com/getamis/alice/crypto/tss/ecdsa/cggmp/sign"
	"github.com/getamis/alice/types"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

var halfN = new(big.Int).Rsh(crypto.S256().Params().N, 1)

// Sign is one party's side of signing one digest with threshold parties.
// alice's CGGMP signing takes the digest in its first round (its presigning
// rounds are not separable through its API), so there are no pooled
// presignatures: every signature is the full four-round protocol.
//
// Abuse as an oracle: a party that joins any run signs whatever digest the
// run names; it is the caller's job (each co-signer's policy, in the next
// step) to decide that the digest is one it would sign.
type Sign struct {
	*run
	s     *sign.Sign
	share *Share
	dig   [32]byte
}

// NewSign prepares share's holder's side of signing digest with signers.
func NewSign(session mpc.SessionID, share *Share, signers []mpc.PartyID, digest [32]byte) (*Sign, error) {
	if share.paillier == nil {
		return nil, errors.New("cggmp: the share has no Paillier key yet: refresh it before signing")
	}
	if err := checkParties(share.party, signers); err != nil {
		return nil, err
	}
	if len(signers) < int(share.threshold) {
		return nil, fmt.Errorf("cggmp: %d signers, the key needs %d", len(signers), share.threshold)
	}
	for _, p := range signers {
		if !slices.Contains(share.parties, p) {
			return nil, fmt.Errorf("cggmp: %s holds no share of this key", p)
		}
	}
	g := &Sign{run: newRun(share.party, signers), share: share, dig: digest}
	ssid := cggmp.ComputeSSID(session[:], []byte("txfence sign"), share.rid)
	s, err := sign.NewSign(share.threshold, ssid, share.secret, share.pub, pick(share.partial, signers), share.paillier, pick(share.ped, signers), pick(share.bks, signers), digest[:], g.run, g.run)
	if err != nil {
		return nil, fmt.Errorf("cggmp: new signing: %w", err)
	}
	g.s, g.main, g.start = s, s, s.Start
	g.newMsg = func() types.Message { return new(sign.Message) }
	return g, nil
}

// Signature is the 65-byte [R || S || V] signature (V 0 or 1, S in the
// lower half of the order as Ethereum requires) once the run is done.
func (g *Sign) Signature() ([]byte, error) {
	if err := g.Err(); err != nil {
		return nil, err
	}
	res, err := g.s.GetResult()
	if err != nil {
		return nil, fmt.Errorf("cggmp: signing result: %w", err)
	}
	s := new(big.Int).Set(res.S)
	if s.Cmp(halfN) > 0 {
		s.Sub(crypto.S256().Params().N, s)
	}
	sig := make([]byte, 65)
	res.R.FillBytes(sig[:32])
	s.FillBytes(sig[32:64])
	want := crypto.FromECDSAPub(g.share.PublicKey())
	for v := byte(0); v < 2; v++ {
		sig[64] = v
		if got, err := crypto.Ecrecover(g.dig[:], sig); err == nil && string(got) == string(want) {
			return sig, nil
		}
	}
	return nil, errors.New("cggmp: the signature does not recover to the joint key")
}
