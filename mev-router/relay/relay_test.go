package relay_test

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/flashbots"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// TestPrivateNeverReachesThePublicPool, for each relay protocol: a private
// transaction is accepted by the relay, is in no public pool and has no
// receipt until the relay builds a block, and is then seen included by the
// watcher on our own node.
func TestPrivateNeverReachesThePublicPool(t *testing.T) {
	t.Parallel()
	for _, kind := range []relay.Kind{relay.Protect, relay.MEVShare, relay.Bundle} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{kind}, Blocks: 5})
			raws, hashes := s.Transfers(t, 0, 1)
			hash := hashes[0]
			res, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate})
			if err != nil {
				t.Fatal(err)
			}
			if r := res[0]; !r.Accepted || r.Route != mevrouter.RoutePrivate || len(r.AcceptedBy) != 1 || r.AcceptedBy[0] != string(kind) || r.MaxBlock != s.Head(t)+5 {
				t.Fatalf("private send: %+v (err %v)", r, r.Err)
			}
			for range 3 { // and again after each of a few polls
				if s.InPool(t, hash) {
					t.Fatal("a private transaction is in the public node's pool before inclusion")
				}
				if st := s.Status(t, hash); st.State != mevrouter.PrivatePending {
					t.Fatalf("status before the relay builds: %+v", st)
				}
			}
			if _, err := s.Node.Client().TransactionReceipt(mevroutertest.Context(t), hash); err == nil {
				t.Fatal("a receipt before the relay built a block")
			}

			block, included, err := s.Relay.BuildBlock(mevroutertest.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(included) != 1 || included[0] != hash {
				t.Fatalf("the relay's block %d included %v, want %s", block, included, hash)
			}
			st := s.Status(t, hash)
			if st.State != mevrouter.PrivateIncluded || st.Block != block {
				t.Fatalf("status after the block: %+v, want included in %d", st, block)
			}
			if r := chaintest.WaitReceipt(t, s.Node, hash); r.BlockNumber.Uint64() != block {
				t.Errorf("receipt in block %d, want %d", r.BlockNumber, block)
			}
		})
	}
}

// TestExpiryFallsBackToPublicOnlyWhenAllowed: two private sends expire
// unincluded; the one whose request allowed it goes to the public pool
// and is mined, turning up included; the other stays out of every pool.
func TestExpiryFallsBackToPublicOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}, Blocks: 5})
	maxBlock := s.Head(t) + 2
	send := func(account int, fallback mevrouter.Fallback) common.Hash {
		raws, hashes := s.Transfers(t, account, 1)
		res, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate,
			Private: mevrouter.PrivateRequest{MaxBlock: maxBlock, Fallback: fallback}})
		if err != nil || !res[0].Accepted || res[0].MaxBlock != maxBlock {
			t.Fatalf("send: %+v, %v", res, err)
		}
		return hashes[0]
	}
	withFallback, without := send(1, mevrouter.FallbackPublic), send(2, mevrouter.FallbackNone)

	// Blocks go by without the relay: nothing private is included.
	if err := s.Node.Mine(mevroutertest.Context(t), 2); err != nil {
		t.Fatal(err)
	}
	for _, h := range []common.Hash{withFallback, without} {
		if st := s.Status(t, h); st.State != mevrouter.PrivateExpired {
			t.Fatalf("%s after its max block: %+v, want expired", h, st)
		}
	}
	if st, _ := s.Private.Status(withFallback); !st.FellBack || !s.InPool(t, withFallback) {
		t.Fatalf("the send that allows fallback was not sent publicly: %+v", st)
	}
	if st, _ := s.Private.Status(without); st.FellBack || s.InPool(t, without) {
		t.Fatalf("the send without fallback reached the public pool: %+v", st)
	}

	// The next block mines the fallback; the relay lets the other expire.
	block, included, err := s.Relay.BuildBlock(mevroutertest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(included) != 0 {
		t.Errorf("the relay included %v past their max block", included)
	}
	if st := s.Status(t, withFallback); st.State != mevrouter.PrivateIncluded || st.Block != block {
		t.Errorf("fallback after the next block: %+v, want included in %d", st, block)
	}
	if st := s.Status(t, without); st.State != mevrouter.PrivateExpired {
		t.Errorf("no-fallback send: %+v, want still expired", st)
	}
	if relaySt, err := (&flashbots.Client{URL: s.RelayURL}).TxStatus(mevroutertest.Context(t), without); err != nil || relaySt.Status != flashbots.StateFailed {
		t.Errorf("the relay reports %+v (%v) for the expired send, want FAILED", relaySt, err)
	}
	if got := mevroutertest.Counter(t, s.Registry, "txfence_mevrouter_private_outcomes_total", map[string]string{"state": "fell_back"}); got != 1 {
		t.Errorf("fell_back counted %v times, want 1", got)
	}
}

func TestCancelKeepsItOutOfTheBlock(t *testing.T) {
	t.Parallel()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}, Blocks: 5})
	raws, hashes := s.Transfers(t, 0, 1)
	hash := hashes[0]
	if _, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Private.Cancel(mevroutertest.Context(t), hash)
	if err != nil || st.State != mevrouter.PrivateCancelled {
		t.Fatalf("cancel: %+v, %v", st, err)
	}
	if _, included, err := s.Relay.BuildBlock(mevroutertest.Context(t)); err != nil || len(included) != 0 {
		t.Fatalf("block after the cancel included %v (%v)", included, err)
	}
	if st := s.Status(t, hash); st.State != mevrouter.PrivateCancelled {
		t.Errorf("after the block: %+v", st)
	}
	if _, err := s.Private.Cancel(mevroutertest.Context(t), common.Hash{1}); errs.KindOf(err) != errs.NotFound {
		t.Errorf("cancel of an unknown send: %v, want not found", err)
	}
}

func TestCancelOfAnIncludedSendIsAConflict(t *testing.T) {
	t.Parallel()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}, Blocks: 5})
	raws, hashes := s.Transfers(t, 0, 1)
	if _, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Relay.BuildBlock(mevroutertest.Context(t)); err != nil {
		t.Fatal(err)
	}
	s.Status(t, hashes[0])
	if _, err := s.Private.Cancel(mevroutertest.Context(t), hashes[0]); errs.KindOf(err) != errs.Conflict {
		t.Errorf("cancel of an included send: %v, want conflict", err)
	}
}

// TestARelayRefusingOurSignatureFailsTheSend: the relay admits other
// signers only; its refusal is reported, and the send is failed, not lost.
func TestARelayRefusingOurSignatureFailsTheSend(t *testing.T) {
	t.Parallel()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}, AllowedSigners: []common.Address{common.HexToAddress("0x0000000000000000000000000000000000000001")}})
	raws, hashes := s.Transfers(t, 0, 1)
	res, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Accepted || res[0].Err == nil || res[0].Err.Endpoint != string(relay.Protect) {
		t.Fatalf("refused send answered %+v (%v)", res[0], res[0].Err)
	}
	if res[0].Err.Category != nodeerr.Transient {
		t.Errorf("category %s, want transient (a relay's 403 is about us, not the transaction)", res[0].Err.Category)
	}
	if st, ok := s.Private.Status(hashes[0]); !ok || st.State != mevrouter.PrivateFailed {
		t.Errorf("status %+v, want failed", st)
	}
}
