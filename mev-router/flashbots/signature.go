package flashbots

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

// SignatureHeader carries "<address>:<signature>" over a request body.
// Relays use the address for reputation and rate limits, and to decide
// who may cancel what was sent.
const SignatureHeader = "X-Flashbots-Signature"

// Errors from Verify, wrapped with the detail of what was wrong.
var (
	ErrNoSignature      = errors.New("missing " + SignatureHeader + " header")
	ErrInvalidSignature = errors.New("invalid " + SignatureHeader + " header")
)

// Sign returns the SignatureHeader value for body: the checksummed address
// of key, a colon, and the 0x-hex 65-byte signature [R || S || V] with V
// in 27/28 form. What is signed is the EIP-191 personal message whose text
// is the 0x-prefixed lowercase hex of keccak256(body), as Flashbots
// documents (ethers: wallet.signMessage(id(body))), so a header made by
// ethers, cast or MetaMask verifies here and the other way round.
//
// Oracle warning: Sign produces a personal_sign signature over text the
// caller chooses (a hash of any bytes). Anyone who can make a service call
// Sign with a key obtains that key's signature on an EIP-191 message, which
// some contracts and off-chain systems accept as consent (permits, logins).
// key must therefore be a dedicated relay identity key that holds no funds
// and signs nothing else; never a transaction-signing key.
func Sign(key *ecdsa.PrivateKey, body []byte) (string, error) {
	if key == nil {
		return "", errors.New("sign relay request: no key")
	}
	sig, err := crypto.Sign(messageHash(body), key)
	if err != nil {
		return "", fmt.Errorf("sign relay request: %w", err)
	}
	// crypto.Sign returns V as 0/1; personal_sign signers (ethers, cast,
	// MetaMask) write 27/28, the form ecrecover expects.
	sig[crypto.RecoveryIDOffset] += 27
	return crypto.PubkeyToAddress(key.PublicKey).Hex() + ":" + hexutil.Encode(sig), nil
}

// Verify checks a SignatureHeader value against body and returns the
// address that signed it. The address part is compared case-insensitively
// (it need not be checksummed); V may be 0/1 or 27/28. Malleable signatures
// (S in the upper half of the curve order) are refused, as the usual
// secp256k1 verifiers do. Errors wrap ErrNoSignature or ErrInvalidSignature.
func Verify(header string, body []byte) (common.Address, error) {
	if header == "" {
		return common.Address{}, ErrNoSignature
	}
	addrText, sigText, ok := strings.Cut(header, ":")
	if !ok {
		return common.Address{}, fmt.Errorf("%w: want <address>:<signature>, no colon found", ErrInvalidSignature)
	}
	if strings.Contains(sigText, ":") {
		return common.Address{}, fmt.Errorf("%w: want <address>:<signature>, found more than one colon", ErrInvalidSignature)
	}
	if (!strings.HasPrefix(addrText, "0x") && !strings.HasPrefix(addrText, "0X")) || !common.IsHexAddress(addrText) {
		return common.Address{}, fmt.Errorf("%w: address %q is not a 0x-prefixed 20-byte hex address", ErrInvalidSignature, clip(addrText))
	}
	claimed := common.HexToAddress(addrText)
	sig, err := hexutil.Decode(sigText)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: signature is not 0x-prefixed hex: %v", ErrInvalidSignature, err)
	}
	if len(sig) != crypto.SignatureLength {
		return common.Address{}, fmt.Errorf("%w: signature is %d bytes, want %d", ErrInvalidSignature, len(sig), crypto.SignatureLength)
	}
	v := sig[crypto.RecoveryIDOffset]
	if v >= 27 {
		v -= 27
	}
	sig[crypto.RecoveryIDOffset] = v
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if !crypto.ValidateSignatureValues(v, r, s, true) {
		return common.Address{}, fmt.Errorf("%w: signature values out of range (recovery id, R or S; high S is refused)", ErrInvalidSignature)
	}
	pub, err := crypto.SigToPub(messageHash(body), sig)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: recover signer: %v", ErrInvalidSignature, err)
	}
	if got := crypto.PubkeyToAddress(*pub); got != claimed {
		// The recovered address says nothing useful to a caller whose body
		// or key differs; the claimed one is what they sent.
		return common.Address{}, fmt.Errorf("%w: signature is not by %s over this body", ErrInvalidSignature, claimed.Hex())
	}
	return claimed, nil
}

// messageHash is the EIP-191 personal-message hash of the hex text of
// keccak256(body): the text, not the 32 bytes, is the message.
func messageHash(body []byte) []byte {
	return accounts.TextHash([]byte(crypto.Keccak256Hash(body).Hex()))
}

// clip keeps messages built from another party's input short: a relay's
// error text or a header's address part ends up in logs.
func clip(s string) string {
	const max = 256
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}
