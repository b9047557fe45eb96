package cggmp

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"

	pt "github.com/getamis/alice/crypto/ecpointgrouplaw"
	"github.com/getamis/alice/crypto/tss/ecdsa/cggmp/dkg"
	"github.com/getamis/alice/types"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// Keygen is one party's side of a distributed key generation: no party ever
// holds the key. After alice's DKG the parties exchange their partial public
// keys and check them against the joint key. The Share it yields needs a
// Refresh before it can sign.
type Keygen struct {
	*run
	d       *dkg.DKG
	parties []mpc.PartyID
	thresh  uint32

	mu      sync.Mutex
	partial map[string]*pt.ECPoint
	allIn   chan struct{}
	share   *Share
}

// NewKeygen prepares self's side of a threshold-of-parties key generation.
func NewKeygen(session mpc.SessionID, self mpc.PartyID, parties []mpc.PartyID, threshold uint32) (*Keygen, error) {
	if err := checkParties(self, parties); err != nil {
		return nil, err
	}
	k := &Keygen{run: newRun(self, parties), parties: slices.Clone(parties), thresh: threshold, partial: map[string]*pt.ECPoint{}, allIn: make(chan struct{})}
	d, err := dkg.NewDKG(curve, k.run, session[:], threshold, 0, k.run)
	if err != nil {
		return nil, fmt.Errorf("cggmp: new key generation: %w", err)
	}
	k.d, k.main, k.start = d, d, d.Start
	k.newMsg = func() types.Message { return new(dkg.Message) }
	k.extra = k.exchangePartials
	k.deliverExtra = k.receivePartial
	return k, nil
}

func (k *Keygen) exchangePartials() error {
	res, err := k.d.GetResult()
	if err != nil {
		return fmt.Errorf("cggmp: key generation result: %w", err)
	}
	own := pt.ScalarBaseMult(curve, res.Share)
	payload := make([]byte, 64)
	own.GetX().FillBytes(payload[:32])
	own.GetY().FillBytes(payload[32:])
	for _, p := range k.parties {
		if p != k.self {
			k.out(p, extraRound, payload)
		}
	}
	<-k.allIn
	k.mu.Lock()
	defer k.mu.Unlock()
	k.partial[k.SelfID()] = own
	if err := checkPartials(k.thresh, k.parties, res.Bks, k.partial, res.PublicKey); err != nil {
		return fmt.Errorf("cggmp: key generation: %w", err)
	}
	k.share = &Share{party: k.self, parties: k.parties, threshold: k.thresh, pub: res.PublicKey, secret: res.Share, rid: res.Rid, bks: res.Bks, partial: k.partial}
	return nil
}

func (k *Keygen) receivePartial(from mpc.PartyID, payload []byte) error {
	if len(payload) != 64 {
		return errors.New("partial public key: not 64 bytes")
	}
	p, err := pt.NewECPoint(curve, new(big.Int).SetBytes(payload[:32]), new(big.Int).SetBytes(payload[32:]))
	if err != nil {
		return fmt.Errorf("partial public key: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.partial[partyString(from)]; dup {
		return errors.New("partial public key sent twice")
	}
	k.partial[partyString(from)] = p
	if len(k.partial) == len(k.parties)-1 {
		close(k.allIn)
	}
	return nil
}

// Share is the party's share once the run is done.
func (k *Keygen) Share() (*Share, error) {
	if err := k.Err(); err != nil {
		return nil, err
	}
	return k.share, nil
}
