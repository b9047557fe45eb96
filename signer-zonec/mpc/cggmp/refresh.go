package cggmp

import (
	"fmt"

	"github.com/getamis/alice/crypto/tss/ecdsa/cggmp"
	"github.com/getamis/alice/crypto/tss/ecdsa/cggmp/refresh"
	"github.com/getamis/alice/types"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// Refresh is one party's side of a proactive refresh: every party of the key
// takes part, the joint key (and address) stays, every share changes, and
// each party makes a new Paillier key with its proofs (Paillier-Blum modulus,
// no small factor, ring-Pedersen parameters), which is what signing needs.
// Shares from before a refresh do not combine with shares from after it.
type Refresh struct {
	*run
	r   *refresh.Refresh
	old *Share
}

// NewRefresh prepares old's holder's side of a refresh of old's key.
func NewRefresh(session mpc.SessionID, old *Share) (*Refresh, error) {
	f := &Refresh{run: newRun(old.party, old.parties), old: old}
	ssid := cggmp.ComputeSSID(session[:], []byte("txfence refresh"), old.rid)
	r, err := refresh.NewRefresh(old.secret, old.pub, f.run, old.threshold, old.partial, old.bks, paillierBits, ssid, f.run)
	if err != nil {
		return nil, fmt.Errorf("cggmp: new refresh: %w", err)
	}
	f.r, f.main, f.start = r, r, r.Start
	f.newMsg = func() types.Message { return new(refresh.Message) }
	return f, nil
}

// Share is the party's new share once the run is done.
func (f *Refresh) Share() (*Share, error) {
	if err := f.Err(); err != nil {
		return nil, err
	}
	res, err := f.r.GetResult()
	if err != nil {
		return nil, fmt.Errorf("cggmp: refresh result: %w", err)
	}
	s := *f.old
	s.secret, s.partial, s.paillier, s.ped = res.Share, res.PartialPubKey, res.PaillierKey, res.PedParameter
	return &s, nil
}
