// Package mpc is the domain of threshold (MPC) signing in Zone C: the
// parties that hold shares of one key, the sessions a protocol run belongs
// to, the envelope every protocol message travels in, and the runner that
// refuses a message of another session or a replay before the protocol sees
// it. The cryptography lives in an adapter named after its protocol
// (mpc/cggmp); this package imports none.
//
// This module is separate from signer-zonec's so that signerd, which links
// signer-zonec, does not link the MPC library until a co-signer needs it.
package mpc

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// PartyID names one share-holder of a key, 1..n.
type PartyID uint32

func (p PartyID) String() string { return fmt.Sprintf("party %d", uint32(p)) }

// SessionID names one protocol run (a key generation, a refresh, a
// signature). The adapter binds it into the protocol's proofs as well, so a
// message of one run is worthless in another even if the envelope is rewritten.
type SessionID [16]byte

// NewSessionID returns a random session id.
func NewSessionID() (SessionID, error) {
	var s SessionID
	if _, err := rand.Read(s[:]); err != nil {
		return SessionID{}, fmt.Errorf("new session id: %w", err)
	}
	return s, nil
}

func (s SessionID) String() string { return hex.EncodeToString(s[:]) }

// Envelope is one protocol message between two parties. Payload is opaque to
// everything but the adapter; Round is the adapter's message type, carried
// for logs and replay detection.
type Envelope struct {
	Session SessionID
	Round   uint32
	From    PartyID
	To      PartyID
	Payload []byte
}

// Protocol is one party's side of one protocol run over opaque messages.
// Implementations are safe for concurrent Deliver calls.
type Protocol interface {
	// Start begins the run; the protocol hands its outgoing messages to send,
	// possibly from other goroutines, until the run is over.
	Start(send func(to PartyID, round uint32, payload []byte)) error
	// Deliver hands the protocol a message from a peer. An error means the
	// payload is malformed or fails the protocol's checks: the run must abort.
	Deliver(from PartyID, round uint32, payload []byte) error
	// Done is closed when the run has finished, successfully or not.
	Done() <-chan struct{}
	// Err is the run's failure, if any, once Done is closed.
	Err() error
}
