package lease

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/txfence/txfence/txmanager"
)

// PreferredNode is the node that should own key among nodes, by
// rendezvous (highest random weight) hashing: every node weighs every
// (signer, node) pair the same way and the heaviest node wins, so all
// nodes agree without talking to each other, and a node joining or
// leaving moves only the signers it wins or held (about 1/N of them).
// It returns "" when nodes is empty.
//
// The weight is the first 8 bytes, big-endian, of
// SHA-256("txfence/rendezvous/v1" 0x00 || chain id as 8 bytes big-endian
// || signer's 20 bytes || node id). SHA-256 rather than a faster
// non-cryptographic hash because its output is fixed forever and spreads
// node ids that differ in one character (node-1, node-2) evenly; nodes of
// different releases must compute the same owners during a rolling
// deploy, and TestPreferredNodeIsStable pins it. Equal weights go to the
// smaller node id.
func PreferredNode(key txmanager.SignerKey, nodes []string) string {
	var (
		best   string
		bestW  uint64
		picked bool
	)
	for _, n := range nodes {
		w := weight(key, n)
		if !picked || w > bestW || (w == bestW && n < best) {
			best, bestW, picked = n, w, true
		}
	}
	return best
}

const weightDomain = "txfence/rendezvous/v1\x00"

func weight(key txmanager.SignerKey, node string) uint64 {
	buf := make([]byte, 0, len(weightDomain)+8+20+len(node))
	buf = append(buf, weightDomain...)
	buf = binary.BigEndian.AppendUint64(buf, key.ChainID)
	buf = append(buf, key.Signer.Bytes()...)
	buf = append(buf, node...)
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8])
}
