package lease_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/lease"
)

// TestPreferredNodeIsStable pins the hash: nodes of two releases running
// side by side must agree on every owner, so a change here is a breaking
// change of the cluster protocol, not a refactoring.
func TestPreferredNodeIsStable(t *testing.T) {
	t.Parallel()
	nodes := []string{"txmanagerd-0", "txmanagerd-1", "txmanagerd-2"}
	got := make([]string, 8)
	for i := range got {
		got[i] = lease.PreferredNode(signerKey(i), nodes)
	}
	want := goldenOwners
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("preferred owners = %q; want %q", got, want)
	}
	// The order of the node list does not matter.
	for i := range got {
		if p := lease.PreferredNode(signerKey(i), []string{nodes[2], nodes[0], nodes[1]}); p != got[i] {
			t.Errorf("signer %d: %s with the nodes reordered, %s before", i, p, got[i])
		}
	}
	if p := lease.PreferredNode(signerKey(0), nil); p != "" {
		t.Errorf("no nodes: preferred %q", p)
	}
}

// goldenOwners were computed outside Go from the formula in
// PreferredNode's documentation.
var goldenOwners = []string{"txmanagerd-0", "txmanagerd-0", "txmanagerd-1", "txmanagerd-0", "txmanagerd-0", "txmanagerd-2", "txmanagerd-2", "txmanagerd-2"}

func TestPreferredNodeSpreadsAndMovesLittle(t *testing.T) {
	t.Parallel()
	nodes := []string{"node-1", "node-2", "node-3", "node-4", "node-5"}
	const n = 5000
	count := make(map[string]int)
	for i := range n {
		count[lease.PreferredNode(signerKey(i), nodes)]++
	}
	for _, node := range nodes {
		if share := float64(count[node]) / n; math.Abs(share-0.2) > 0.03 {
			t.Errorf("%s owns %.1f%% of the signers; want about 20%%", node, 100*share)
		}
	}
	// A node joining takes signers only for itself; a node leaving gives
	// away only its own.
	joined := append(nodes[:5:5], "node-6")
	left := nodes[1:]
	for i := range n {
		k := signerKey(i)
		before := lease.PreferredNode(k, nodes)
		if after := lease.PreferredNode(k, joined); after != before && after != "node-6" {
			t.Fatalf("signer %d moved from %s to %s when node-6 joined", i, before, after)
		}
		if after := lease.PreferredNode(k, left); after != before && before != "node-1" {
			t.Fatalf("signer %d moved from %s to %s when node-1 left", i, before, after)
		}
	}
}

func signerKey(i int) txmanager.SignerKey {
	return txmanager.SignerKey{ChainID: uint64(1 + i%2*31336), Signer: common.BytesToAddress([]byte{0x5e, byte(i >> 8), byte(i)})}
}
