package cggmp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/signer-zonec/mpc"
)

// router passes envelopes between in-process runners, each delivery on its
// own goroutine as a network would. tamper, when set, sees every envelope
// and returns what to deliver instead (none, it, or more).
type router struct {
	t       testing.TB
	mu      sync.Mutex
	runners map[mpc.PartyID]*mpc.Runner
	tamper  func(mpc.Envelope) []mpc.Envelope
	refused []error
}

func (r *router) send(env mpc.Envelope) {
	envs := []mpc.Envelope{env}
	if r.tamper != nil {
		envs = r.tamper(env)
	}
	for _, e := range envs {
		r.mu.Lock()
		to := r.runners[e.To]
		r.mu.Unlock()
		go func() {
			if err := to.Receive(e); err != nil {
				r.mu.Lock()
				r.refused = append(r.refused, err)
				r.mu.Unlock()
			}
		}()
	}
}

// refusals is what the runners refused so far; deliveries may still be
// under way after a run ends (late echoes), so it is read under the lock.
func (r *router) refusals() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.refused...)
}

// runAll runs one protocol per party to the end and returns each party's error.
func (r *router) runAll(session mpc.SessionID, protos map[mpc.PartyID]mpc.Protocol) map[mpc.PartyID]error {
	r.t.Helper()
	var parties []mpc.PartyID
	for p := range protos {
		parties = append(parties, p)
	}
	r.mu.Lock()
	r.runners = map[mpc.PartyID]*mpc.Runner{}
	for p, proto := range protos {
		r.runners[p] = mpc.NewRunner(session, p, parties, proto, r.send)
	}
	r.mu.Unlock()
	for _, p := range parties {
		if err := r.runners[p].Start(); err != nil {
			r.t.Fatalf("start %s: %v", p, err)
		}
	}
	// A bound for a run that stalls instead of failing; never a timing
	// assertion. The first party to fail ends the others' wait: a party
	// that stopped sends nothing more.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[mpc.PartyID]error{}
	for _, p := range parties {
		wg.Go(func() {
			err := r.runners[p].Wait(ctx)
			if err != nil {
				cancel()
			}
			mu.Lock()
			errs[p] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

func newSession(t testing.TB) mpc.SessionID {
	t.Helper()
	s, err := mpc.NewSessionID()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustOK(t testing.TB, what string, errs map[mpc.PartyID]error) {
	t.Helper()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("%s: %s: %v", what, p, err)
		}
	}
}

var all = []mpc.PartyID{1, 2, 3}

// keygen runs a 2-of-3 key generation and its first refresh (which gives
// each party its Paillier key) and returns the signing-ready shares.
func keygen(t testing.TB) map[mpc.PartyID]*Share {
	t.Helper()
	session := newSession(t)
	kgs := map[mpc.PartyID]*Keygen{}
	protos := map[mpc.PartyID]mpc.Protocol{}
	for _, p := range all {
		k, err := NewKeygen(session, p, all, 2)
		if err != nil {
			t.Fatal(err)
		}
		kgs[p], protos[p] = k, k
	}
	mustOK(t, "keygen", (&router{t: t}).runAll(session, protos))
	shares := map[mpc.PartyID]*Share{}
	for p, k := range kgs {
		s, err := k.Share()
		if err != nil {
			t.Fatal(err)
		}
		shares[p] = s
	}
	return refreshAll(t, shares)
}

func refreshAll(t testing.TB, old map[mpc.PartyID]*Share) map[mpc.PartyID]*Share {
	t.Helper()
	session := newSession(t)
	rs := map[mpc.PartyID]*Refresh{}
	protos := map[mpc.PartyID]mpc.Protocol{}
	for p, s := range old {
		r, err := NewRefresh(session, s)
		if err != nil {
			t.Fatal(err)
		}
		rs[p], protos[p] = r, r
	}
	mustOK(t, "refresh", (&router{t: t}).runAll(session, protos))
	shares := map[mpc.PartyID]*Share{}
	for p, r := range rs {
		s, err := r.Share()
		if err != nil {
			t.Fatal(err)
		}
		shares[p] = s
	}
	return shares
}

// signWith runs a signing of digest by the given shares through rt and
// returns each party's signature and error.
func signWith(t testing.TB, rt *router, shares []*Share, digest [32]byte) (map[mpc.PartyID][]byte, map[mpc.PartyID]error) {
	t.Helper()
	session := newSession(t)
	var signers []mpc.PartyID
	for _, s := range shares {
		signers = append(signers, s.Party())
	}
	gs := map[mpc.PartyID]*Sign{}
	protos := map[mpc.PartyID]mpc.Protocol{}
	for _, s := range shares {
		g, err := NewSign(session, s, signers, digest)
		if err != nil {
			t.Fatal(err)
		}
		gs[s.Party()], protos[s.Party()] = g, g
	}
	errs := rt.runAll(session, protos)
	sigs := map[mpc.PartyID][]byte{}
	for p, g := range gs {
		if errs[p] == nil {
			sig, err := g.Signature()
			errs[p] = err
			sigs[p] = sig
		}
	}
	return sigs, errs
}
