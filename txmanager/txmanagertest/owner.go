package txmanagertest

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Owner stands in for the worker of a signer's lease in tests that need
// transactions in a given state without a chain or a signer: it takes the
// lease and moves transactions along through the store, giving nonces
// from 0 up and a made-up signed attempt.
type Owner struct {
	store *postgres.Store
	fence txmanager.Fence
	next  uint64
}

// NewOwner takes key's lease on s's store for a minute.
func (s *Server) NewOwner(t testing.TB, key txmanager.SignerKey) *Owner {
	t.Helper()
	token, ok, err := s.Store.Acquire(context.Background(), "test-owner", key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire the lease of %s: %v %v", key, ok, err)
	}
	return &Owner{store: s.Store, fence: txmanager.Fence{Node: "test-owner", Key: key, Token: token}}
}

// MoveTo takes the INIT transaction id up to state: ALLOCATED, SIGNED
// (its attempt's raw bytes are the id, its hash the id twice) or
// BROADCASTED on the public route.
func (o *Owner) MoveTo(t testing.TB, id uuid.UUID, state txmanager.State) {
	t.Helper()
	ctx := context.Background()
	fees := txmanager.Fees{MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
	if _, err := o.store.Simulated(ctx, o.fence, id, 21000); err != nil {
		t.Fatal(err)
	}
	if _, err := o.store.Allocate(ctx, o.fence, []uuid.UUID{id}, []txmanager.Fees{fees}, o.next); err != nil {
		t.Fatal(err)
	}
	o.next++
	if state == txmanager.StateAllocated {
		return
	}
	if _, err := o.store.Signed(ctx, o.fence, []txmanager.Attempt{{TxID: id, Raw: id[:], Hash: common.BytesToHash(append(id[:], id[:]...)),
		MaxFeePerGas: fees.MaxFeePerGas, MaxPriorityFeePerGas: fees.MaxPriorityFeePerGas}}); err != nil {
		t.Fatal(err)
	}
	if state == txmanager.StateBroadcasted {
		if _, err := o.store.Broadcasted(ctx, o.fence, []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// Fence is the owner's lease, for the store's fenced writes.
func (o *Owner) Fence() txmanager.Fence { return o.fence }
