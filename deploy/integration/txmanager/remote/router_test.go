package remote_test

import (
	"net/http"
	"testing"

	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/remote"
)

// mevrouterd is a real mevrouterd API over a real anvil with the
// development relay, and a client of it as txmanager.
func mevrouterd(t *testing.T) (*remote.Router, *mevroutertest.Stack) {
	t.Helper()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}})
	pki := servicetest.PKI(t)
	url := s.Serve(t, pki, func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.MEVRouter, h) })
	c, err := remote.NewRouter(url, servicetest.Client(t, pki, "txmanager", "mevrouter"))
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestBroadcastPublicAndPrivate(t *testing.T) {
	t.Parallel()
	r, s := mevrouterd(t)
	raws, hashes := s.Transfers(t, 0, 2)
	sent, err := r.Broadcast(ctx(t), remote.Broadcast{Raw: raws, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range sent {
		if !x.Accepted || x.Hash != hashes[i] || x.Route != txmanager.RoutePublic || len(x.AcceptedBy) != 1 {
			t.Errorf("public %d: %+v", i, x)
		}
	}
	// Sent again: already known counts as accepted.
	if again, err := r.Broadcast(ctx(t), remote.Broadcast{Raw: raws[:1], Route: txmanager.RoutePublic}); err != nil || !again[0].Accepted {
		t.Errorf("resend: %+v %v", again, err)
	}

	raws, hashes = s.Transfers(t, 1, 1)
	sent, err = r.Broadcast(ctx(t), remote.Broadcast{Raw: raws, Route: txmanager.RoutePrivate, MaxBlock: s.Head(t) + 3})
	if err != nil || !sent[0].Accepted || sent[0].Route != txmanager.RoutePrivate || sent[0].Hash != hashes[0] {
		t.Fatalf("private: %+v %v", sent, err)
	}
	if s.InPool(t, hashes[0]) {
		t.Error("a private send reached the public pool")
	}
}

func TestARefusalIsClassifiedAndABadBatchIsInvalid(t *testing.T) {
	t.Parallel()
	r, s := mevrouterd(t)
	raws, _ := s.Transfers(t, 0, 1)
	if _, err := r.Broadcast(ctx(t), remote.Broadcast{Raw: raws, Route: txmanager.RoutePublic}); err != nil {
		t.Fatal(err)
	}
	if err := s.Node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	sent, err := r.Broadcast(ctx(t), remote.Broadcast{Raw: raws, Route: txmanager.RoutePublic})
	if err != nil || sent[0].Accepted || sent[0].Category != "nonce_too_low" || sent[0].Message == "" {
		t.Errorf("a mined transaction again: %+v %v", sent, err)
	}
	if _, err := r.Broadcast(ctx(t), remote.Broadcast{Raw: [][]byte{{1, 2}}, Route: txmanager.RoutePublic}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("not a transaction: %v, want invalid", err)
	}
}
