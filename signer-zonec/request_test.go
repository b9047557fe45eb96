package signer_test

import (
	"bytes"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// goldenRequests cover both types, contract creation, large data, and
// every amount, chain id and counter at its largest.
func goldenRequests() map[string]*signer.Request {
	to := common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	from := common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	expiry := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	data := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 75)
	return map[string]*signer.Request{
		"legacy transfer": {TxID: "tx-legacy", ChainID: 1, From: from, Nonce: 0, Type: signer.Legacy, To: &to,
			Value: big.NewInt(1e18), Gas: 21000, GasPrice: big.NewInt(20e9)},
		"eip1559 creation with an approval": {TxID: "tx-create", ChainID: 31337, From: from, Nonce: 7, Type: signer.DynamicFee,
			Value: new(big.Int), Data: []byte{0x60, 0x00}, Gas: 100000, MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9),
			Approvals: []signer.Approval{{Approver: "alice", MaxFeePerGas: big.NewInt(40e9), Expiry: expiry, Signature: []byte{1, 2, 3}}}},
		"eip1559 at every limit": {TxID: "tx-max", ChainID: ^uint64(0), From: from, Nonce: ^uint64(0), Type: signer.DynamicFee, To: &to,
			Value: maxUint256, Data: data, Gas: ^uint64(0), MaxFeePerGas: maxUint256, MaxPriorityFeePerGas: maxUint256},
		"legacy at every limit": {TxID: "tx-max-legacy", ChainID: ^uint64(0), From: from, Nonce: ^uint64(0), Type: signer.Legacy, To: &to,
			Value: maxUint256, Data: data, Gas: ^uint64(0), GasPrice: maxUint256},
		"legacy free call": {TxID: "tx-free", ChainID: 1 << 40, From: from, Nonce: 1, Type: signer.Legacy, To: &to,
			Value: new(big.Int), Data: data[:1], Gas: 50000, GasPrice: new(big.Int)},
	}
}

// TestDigestsDidNotChange: Request.Digest, FullRequestDigest and the
// signing hash are what they were when the signer built transactions with
// go-ethereum's core/types (the values below were recorded so). Double-sign
// protection finds an identical request by its stored digest, and the
// audit log records both digests: a change would turn a repeated request
// into a new one and leave old records unverifiable.
func TestDigestsDidNotChange(t *testing.T) {
	t.Parallel()
	type hashes struct{ digest, full, signing string }
	golden := map[string]hashes{
		"legacy transfer": {
			"0x26b062cda5e2a3ac396404f6c56179498ca666d650d951f0439438f799c8f7d2",
			"0xb87e100bbc99b0f6aebf81d4d00e5120dfab59c72cf1287edc86d67b9f47430b",
			"0x3437ba062e918ded01d4fc0ee93949e4cb57a55f6fc5dc56ced05902634b938e"},
		"eip1559 creation with an approval": {
			"0xc1fbc2af1513090ed12fe602285be1e59603a1438b402b9383e7341c1cf5ab81",
			"0xfc2de7ef0f8ec99ac6adc31bd7970287baa5a7a2b3a584fdff1896899e12ce37",
			"0xb85ebc7444024e0f564b36fd82de62772780c83f708b1a607eb77a26ed6c9e9a"},
		"eip1559 at every limit": {
			"0xe3729280198ccd2ad13c9328bc1cfe7ad23e439313d915cfdad27d05b576b719",
			"0xebd176fb938109a151496b47100167319f9e09226d33b2f4f2f222bf972c8f56",
			"0xe80184f11c83db0e04046bcf496c8b34d23e85259d079517dfa745b09b0d1232"},
		"legacy at every limit": {
			"0x35a471d208c8b1465955c5da99dbbf93cc13aebca63743d32dcd0302b991edca",
			"0x5dd11ac7315c44941c104a911d2ffd8e82a4cd859238855a9ccd9edbd16d73f5",
			"0xc219e2198c73a19a04d375d8dbe41a220767df59e5ce1dfaae36bfd689a16e02"},
		"legacy free call": {
			"0x9933800469a59243ee2aa90e92f9cf592d8d2daba4c0b251cc294a0e455f5392",
			"0xe0bfe3847d7bdeda38feb23a89444fd528bcf7e9679377cf39381f617f96cb90",
			"0xfbe9e7d16dfad7b2b99b049d500bf0419e1385bf46dcaba6c672701b79a6945e"},
	}
	requests := goldenRequests()
	if len(requests) != len(golden) {
		t.Fatalf("%d requests, %d golden values", len(requests), len(golden))
	}
	for name, r := range requests {
		if err := r.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		signing, err := r.SigningHash()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := hashes{r.Digest().Hex(), signer.FullRequestDigest(r).Hex(), signing.Hex()}
		if want := golden[name]; got != want {
			t.Errorf("%s: digest, full digest, signing hash\n got %q\nwant %q", name, got, want)
		}
	}
}
