// Package cggmp implements mpc's protocols with the CGGMP threshold ECDSA of
// github.com/getamis/alice (crypto/tss/ecdsa/cggmp): key generation, refresh
// of the shares (which also creates each party's Paillier key and its
// proofs) and signing, over secp256k1.
package cggmp

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/getamis/alice/types"
	"google.golang.org/protobuf/proto"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// run adapts one of alice's message mains to mpc.Protocol. alice calls
// MustSend from its own goroutines; run turns those calls into payloads
// for the runner and feeds decoded payloads back to alice.
type run struct {
	self    mpc.PartyID
	peerIDs []string
	newMsg  func() types.Message // an empty message of the protocol, to decode into
	main    types.MessageMain
	start   func()
	// extra, when set, runs once alice is done and may exchange more
	// messages (round extraRound) before the run counts as done.
	extra        func() error
	deliverExtra func(from mpc.PartyID, payload []byte) error

	mu   sync.Mutex
	send func(to mpc.PartyID, round uint32, payload []byte)
	// early holds what alice sent before Start gave the run its send: a
	// peer's message may reach this party, and alice answer it, before
	// this party's Start.
	early []outgoing

	once sync.Once
	done chan struct{}
	err  error
}

// extraRound is the round of the adapter's own messages, after alice's.
const extraRound = 1000

func newRun(self mpc.PartyID, parties []mpc.PartyID) *run {
	r := &run{self: self, done: make(chan struct{})}
	for _, p := range parties {
		if p != self {
			r.peerIDs = append(r.peerIDs, partyString(p))
		}
	}
	return r
}

func partyString(p mpc.PartyID) string { return strconv.FormatUint(uint64(p), 10) }

// types.PeerManager, as alice sees the other parties of the run.

func (r *run) NumPeers() uint32  { return uint32(len(r.peerIDs)) }
func (r *run) PeerIDs() []string { return r.peerIDs }
func (r *run) SelfID() string    { return partyString(r.self) }

func (r *run) MustSend(id string, msg interface{}) {
	m, ok := msg.(types.Message)
	pm, ok2 := msg.(proto.Message)
	to, err := strconv.ParseUint(id, 10, 32)
	if !ok || !ok2 || err != nil {
		r.finish(fmt.Errorf("cggmp: alice sent %T to %q", msg, id))
		return
	}
	payload, err := proto.Marshal(pm)
	if err != nil {
		r.finish(fmt.Errorf("cggmp: encode round %d: %w", m.GetMessageType(), err))
		return
	}
	r.out(mpc.PartyID(to), uint32(m.GetMessageType()), payload)
}

type outgoing struct {
	to      mpc.PartyID
	round   uint32
	payload []byte
}

func (r *run) out(to mpc.PartyID, round uint32, payload []byte) {
	r.mu.Lock()
	send := r.send
	if send == nil {
		r.early = append(r.early, outgoing{to, round, payload})
	}
	r.mu.Unlock()
	if send != nil {
		send(to, round, payload)
	}
}

// types.StateChangedListener.

func (r *run) OnStateChanged(_, newState types.MainState) {
	switch newState {
	case types.StateDone:
		if r.extra != nil {
			go func() { r.finish(r.extra()) }()
			return
		}
		r.finish(nil)
	case types.StateFailed:
		r.finish(errors.New("cggmp: the protocol failed a check"))
	}
}

func (r *run) finish(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

// mpc.Protocol.

func (r *run) Start(send func(to mpc.PartyID, round uint32, payload []byte)) error {
	r.mu.Lock()
	r.send = send
	early := r.early
	r.early = nil
	r.mu.Unlock()
	for _, o := range early {
		send(o.to, o.round, o.payload)
	}
	r.start()
	return nil
}

func (r *run) Deliver(from mpc.PartyID, round uint32, payload []byte) error {
	if r.deliverExtra != nil && round == extraRound {
		return r.deliverExtra(from, payload)
	}
	msg := r.newMsg()
	if err := proto.Unmarshal(payload, msg.(proto.Message)); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if !msg.IsValid() {
		return errors.New("invalid message")
	}
	if err := r.main.AddMessage(msg.GetId(), msg); err != nil {
		return err
	}
	return nil
}

func (r *run) Done() <-chan struct{} { return r.done }

func (r *run) Err() error {
	<-r.done
	return r.err
}

var (
	_ mpc.Protocol               = (*run)(nil)
	_ types.PeerManager          = (*run)(nil)
	_ types.StateChangedListener = (*run)(nil)
)
