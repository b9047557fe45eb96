package mpc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Errors of a message the runner refuses before the protocol sees it. A
// refused message does not abort the run: it may be an attacker's, and the
// run can still finish with the honest parties' messages.
var (
	ErrOtherSession = errors.New("mpc: message of another session")
	ErrNotForMe     = errors.New("mpc: message addressed to another party")
	ErrReplay       = errors.New("mpc: replayed message")
	ErrUnknownParty = errors.New("mpc: message from a party outside the run")
)

// AbortError is a run aborted by a message the protocol rejected; Party is
// the sender of that message, the party to investigate.
type AbortError struct {
	Session SessionID
	Party   PartyID
	Round   uint32
	Err     error
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("mpc: session %s aborted: %s sent a bad round %d message: %v", e.Session, e.Party, e.Round, e.Err)
}

func (e *AbortError) Unwrap() error { return e.Err }

// Runner drives one party's Protocol for one session: it wraps outgoing
// messages in envelopes and checks incoming ones (session, addressee, sender,
// replay) before the protocol reads them.
type Runner struct {
	session SessionID
	self    PartyID
	peers   map[PartyID]bool
	proto   Protocol
	out     func(Envelope)

	mu      sync.Mutex
	seen    map[[32]byte]bool
	abort   *AbortError
	aborted chan struct{}
}

// NewRunner returns a runner for self's side of session among parties
// (self included); out sends an envelope to its addressee.
func NewRunner(session SessionID, self PartyID, parties []PartyID, p Protocol, out func(Envelope)) *Runner {
	peers := make(map[PartyID]bool, len(parties))
	for _, id := range parties {
		if id != self {
			peers[id] = true
		}
	}
	return &Runner{session: session, self: self, peers: peers, proto: p, out: out, seen: map[[32]byte]bool{}, aborted: make(chan struct{})}
}

// Start starts the protocol.
func (r *Runner) Start() error {
	return r.proto.Start(func(to PartyID, round uint32, payload []byte) {
		r.out(Envelope{Session: r.session, Round: round, From: r.self, To: to, Payload: payload})
	})
}

// Receive checks env and hands it to the protocol. It returns an error
// wrapping ErrOtherSession, ErrNotForMe, ErrUnknownParty or ErrReplay for a
// refused message, and an *AbortError when the protocol rejected the
// payload, which also ends the run.
func (r *Runner) Receive(env Envelope) error {
	switch {
	case env.Session != r.session:
		return fmt.Errorf("%w: %s in session %s", ErrOtherSession, env.Session, r.session)
	case env.To != r.self:
		return fmt.Errorf("%w: %s, not %s", ErrNotForMe, env.To, r.self)
	case !r.peers[env.From]:
		return fmt.Errorf("%w: %s", ErrUnknownParty, env.From)
	}
	key := envelopeKey(env)
	r.mu.Lock()
	if r.abort != nil {
		r.mu.Unlock()
		return r.abort
	}
	if r.seen[key] {
		r.mu.Unlock()
		return fmt.Errorf("%w: round %d from %s", ErrReplay, env.Round, env.From)
	}
	r.seen[key] = true
	r.mu.Unlock()

	if err := r.proto.Deliver(env.From, env.Round, env.Payload); err != nil {
		return r.fail(&AbortError{Session: r.session, Party: env.From, Round: env.Round, Err: err})
	}
	return nil
}

func (r *Runner) fail(e *AbortError) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abort == nil {
		r.abort = e
		close(r.aborted)
	}
	return r.abort
}

// Wait returns when the run is over: nil on success, the *AbortError of an
// aborted run, or the protocol's own failure.
func (r *Runner) Wait(ctx context.Context) error {
	select {
	case <-r.proto.Done():
		if err := r.proto.Err(); err != nil {
			return fmt.Errorf("mpc: session %s failed: %w", r.session, err)
		}
		return nil
	case <-r.aborted:
		return r.abort
	case <-ctx.Done():
		return fmt.Errorf("mpc: session %s: %w", r.session, ctx.Err())
	}
}

// envelopeKey identifies a message for replay detection: a party may send
// several messages of one round to the same peer (its own and echoes of
// others'), but never the same one twice.
func envelopeKey(env Envelope) [32]byte {
	h := sha256.New()
	var b [12]byte
	binary.BigEndian.PutUint32(b[0:], uint32(env.From))
	binary.BigEndian.PutUint32(b[4:], uint32(env.To))
	binary.BigEndian.PutUint32(b[8:], env.Round)
	h.Write(b[:])
	h.Write(env.Payload)
	var k [32]byte
	h.Sum(k[:0])
	return k
}
