// Package signertest holds test helpers for the signer: an in-memory key
// backend holding anvil's public development keys. It is never linked into
// signerd (deps_test.go bans it).
package signertest

import (
	"context"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	signer "github.com/txfence/txfence/signer-zonec"
)

// DevKeys are anvil's first three development keys: public, never for value.
var DevKeys = []string{
	"ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
	"59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
	"5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
}

// DevAddress is the address of DevKeys[i].
func DevAddress(i int) common.Address { return devAddresses[i] }

// devAddresses are worked out once: deriving an address from a key costs
// a scalar multiplication, which benchmarks would otherwise count.
var devAddresses = func() []common.Address {
	out := make([]common.Address, len(DevKeys))
	for i, k := range DevKeys {
		priv, err := crypto.HexToECDSA(k)
		if err != nil {
			panic(err)
		}
		out[i] = crypto.PubkeyToAddress(priv.PublicKey)
	}
	return out
}()

// MemoryKeys is a key backend holding keys in memory, as the keystore
// backend does once it has decrypted its files. SetDown makes it fail like
// a sealed Vault.
type MemoryKeys struct {
	mu   sync.Mutex
	keys map[common.Address]*signer.Key
	down error
}

var _ signer.KeyBackend = (*MemoryKeys)(nil)

// NewMemoryKeys holds the given hex private keys.
func NewMemoryKeys(t testing.TB, hexKeys ...string) *MemoryKeys {
	t.Helper()
	m := &MemoryKeys{keys: map[common.Address]*signer.Key{}}
	for _, h := range hexKeys {
		priv, err := crypto.HexToECDSA(h)
		if err != nil {
			t.Fatal(err)
		}
		k, err := signer.NewKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		m.keys[k.Address()] = k
	}
	return m
}

// SetDown makes every Key call fail with err (nil restores).
func (m *MemoryKeys) SetDown(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = err
}

// Name is "memory".
func (m *MemoryKeys) Name() string { return "memory" }

// List lists the held keys.
func (m *MemoryKeys) List(context.Context) ([]signer.KeyInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []signer.KeyInfo
	for a := range m.keys {
		out = append(out, signer.KeyInfo{Address: a, Backend: "memory"})
	}
	return out, nil
}

// Key returns the key of addr.
func (m *MemoryKeys) Key(_ context.Context, addr common.Address) (*signer.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down != nil {
		return nil, m.down
	}
	if k := m.keys[addr]; k != nil {
		return k, nil
	}
	return nil, signer.UnknownKey(addr)
}

// Close destroys the keys.
func (m *MemoryKeys) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keys {
		k.Destroy()
	}
	return nil
}
