package flashbots_test

// These tests hold the mev_sendBundle bodies this package emits against
// Flashbots' reference MEV-Share node, github.com/flashbots/mev-share-node
// (AGPL-3.0). It is imported here, in a test, and nowhere else: test files
// are not linked into mevrouterd.

import (
	"bytes"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/flashbots/mev-share-node/mevshare"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// currentBlock is the head the reference validation assumes; the bundles
// below target the blocks after it.
const currentBlock = 1000

func TestMevSendBundleAgainstReference(t *testing.T) {
	authKey, authAddr := newKey(t)
	userKey, _ := newKey(t)
	_, raw0 := signedTx(t, userKey, 0)
	_, raw1 := signedTx(t, userKey, 1)
	_, raw2 := signedTx(t, userKey, 2)
	pending := common.HexToHash("0x24e6e999b8abf2c4df46e8a02516c0983043039a5a54f89fa87274427ce64798")

	tests := map[string]flashbots.MevBundle{
		"one tx, next block": {
			Inclusion: flashbots.Inclusion{Block: currentBlock + 1},
			Body:      []flashbots.BundleItem{{Tx: raw0}},
		},
		"several txs, a window, revertible": {
			Inclusion: flashbots.Inclusion{Block: currentBlock + 1, MaxBlock: currentBlock + 25},
			Body:      []flashbots.BundleItem{{Tx: raw0}, {Tx: raw1, CanRevert: true}, {Tx: raw2}},
		},
		"backrun of a pending tx": {
			Inclusion: flashbots.Inclusion{Block: currentBlock + 1, MaxBlock: currentBlock + 3},
			Body:      []flashbots.BundleItem{{Hash: pending}, {Tx: raw0}},
			Privacy:   &flashbots.Privacy{Builders: []string{"flashbots", "beaverbuild.org"}},
		},
		"every hint, builders and refunds": {
			Version:   flashbots.BundleVersion,
			Inclusion: flashbots.Inclusion{Block: currentBlock + 2, MaxBlock: currentBlock + 10},
			Body:      []flashbots.BundleItem{{Tx: raw0}, {Tx: raw1}},
			Validity: &flashbots.Validity{
				Refund:       []flashbots.Refund{{BodyIdx: 0, Percent: 90}},
				RefundConfig: []flashbots.RefundConfig{{Address: common.Address{1}, Percent: 60}, {Address: common.Address{2}, Percent: 40}},
			},
			Privacy: &flashbots.Privacy{
				Hints: []flashbots.Hint{flashbots.HintContractAddress, flashbots.HintFunctionSelector, flashbots.HintLogs,
					flashbots.HintCalldata, flashbots.HintHash, flashbots.HintTxHash},
				Builders: []string{"flashbots"},
			},
		},
	}
	for name, bundle := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantHash, err := bundle.Hash()
			if err != nil {
				t.Fatal(err)
			}
			// The fake relay answers with the hash the reference computes,
			// so the client's return value is checked against it too.
			type seen struct {
				params  []byte
				refHash common.Hash
			}
			seenc := make(chan seen, 1)
			_, srv := newFakeRelay(t, authAddr, func(c call) answer {
				args, err := decodeReference(c.Params)
				if err == nil {
					var h common.Hash
					h, _, err = mevshare.ValidateBundle(&args, currentBlock, types.LatestSignerForChainID(big.NewInt(1)))
					if err == nil {
						seenc <- seen{c.Params, h}
						return answer{200, `{"jsonrpc":"2.0","id":1,"result":{"bundleHash":"` + h.Hex() + `"}}`}
					}
				}
				t.Errorf("reference refuses %s: %v", c.Params, err)
				return answer{200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"refused by the reference"}}`}
			})
			c := &flashbots.Client{URL: srv.URL, AuthKey: authKey}
			got, err := c.SendBundle(t.Context(), &bundle)
			if err != nil {
				t.Fatal(err)
			}
			s := <-seenc
			if s.refHash != wantHash || got != wantHash {
				t.Errorf("bundle hash: MevBundle.Hash %s, reference %s, client returned %s", wantHash, s.refHash, got)
			}

			// The other way: what the reference types write (as a
			// reference client would send it) reads back as the bundle.
			refJSON, err := json.Marshal(decodeStrict(t, s.params))
			if err != nil {
				t.Fatal(err)
			}
			var back flashbots.MevBundle
			if err := json.Unmarshal(refJSON, &back); err != nil {
				t.Fatalf("read reference encoding %s: %v", refJSON, err)
			}
			want := bundle
			want.Version = flashbots.BundleVersion
			if diff := cmp.Diff(normalize(want), normalize(back)); diff != "" {
				t.Errorf("reference encoding %s reads back (-want +got):\n%s", refJSON, diff)
			}
		})
	}
}

// TestCheckAgreesWithReference: bundles MevBundle.Check refuses are
// refused by the reference too (encoded without going through Check).
func TestCheckAgreesWithReference(t *testing.T) {
	userKey, _ := newKey(t)
	_, raw := signedTx(t, userKey, 0)
	pending := common.Hash{7}
	tests := map[string]string{
		"maxBlock before block": `{"version":"v0.1","inclusion":{"block":"0x3ea","maxBlock":"0x3e9"},"body":[{"tx":"0x` + common.Bytes2Hex(raw) + `"}]}`,
		"empty body":            `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[]}`,
		"hash only":             `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[{"hash":"` + pending.Hex() + `"}]}`,
		"hash not first":        `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[{"tx":"0x` + common.Bytes2Hex(raw) + `"},{"hash":"` + pending.Hex() + `"}]}`,
		"backrun with hints": `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[{"hash":"` + pending.Hex() + `"},{"tx":"0x` + common.Bytes2Hex(raw) + `"}],
			"privacy":{"hints":["calldata"]}}`,
		"unknown version":   `{"version":"v0.2","inclusion":{"block":"0x3e9"},"body":[{"tx":"0x` + common.Bytes2Hex(raw) + `"}]}`,
		"refund past body":  `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[{"tx":"0x` + common.Bytes2Hex(raw) + `"}],"validity":{"refund":[{"bodyIdx":1,"percent":10}]}}`,
		"refund over 100 %": `{"version":"v0.1","inclusion":{"block":"0x3e9"},"body":[{"tx":"0x` + common.Bytes2Hex(raw) + `"}],"validity":{"refundConfig":[{"address":"0x0000000000000000000000000000000000000001","percent":101}]}}`,
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			args := decodeStrict(t, []byte(body))
			if _, _, err := mevshare.ValidateBundle(&args, currentBlock, types.LatestSignerForChainID(big.NewInt(1))); err == nil {
				t.Errorf("reference accepts %s", body)
			}
			var b flashbots.MevBundle
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				return // refused while reading: as good as Check
			}
			if err := b.Check(); err == nil {
				t.Errorf("Check accepts %s, which the reference refuses", body)
			}
		})
	}
}

// decodeReference reads mev_sendBundle params into the reference type,
// refusing fields the reference does not know.
func decodeReference(params []byte) (mevshare.SendMevBundleArgs, error) {
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	var args mevshare.SendMevBundleArgs
	err := dec.Decode(&args)
	return args, err
}

func decodeStrict(t *testing.T, params []byte) mevshare.SendMevBundleArgs {
	t.Helper()
	args, err := decodeReference(params)
	if err != nil {
		t.Fatalf("reference type refuses %s: %v", params, err)
	}
	return args
}

// normalize makes an absent and an empty Validity compare equal: the
// reference type always writes "validity":{}.
func normalize(b flashbots.MevBundle) flashbots.MevBundle {
	if b.Validity != nil && len(b.Validity.Refund) == 0 && len(b.Validity.RefundConfig) == 0 {
		b.Validity = nil
	}
	return b
}
