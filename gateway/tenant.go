// Package gateway is the public edge's domain: tenants and the signers
// they own, API keys with their scopes and reach, webhook subscriptions
// and their deliveries, and the rules that keep one tenant's keys and
// events from reaching another's. The postgres package keeps them; the
// httpapi package serves them; the webhook package delivers.
package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ethereum/go-ethereum/common"
	"github.com/txfence/txfence/shared/errs"
)

// SignerRef names one signer on one chain.
type SignerRef struct {
	ChainID uint64
	Address common.Address
}

func (s SignerRef) String() string {
	return fmt.Sprintf("%d:%s", s.ChainID, strings.ToLower(s.Address.Hex()))
}

// ParseSignerRef reads a signer written "chain_id:0xaddress".
func ParseSignerRef(s string) (SignerRef, error) {
	chain, addr, ok := strings.Cut(s, ":")
	id, err := strconv.ParseUint(chain, 10, 63)
	if !ok || err != nil || id == 0 || !strings.HasPrefix(addr, "0x") || !common.IsHexAddress(addr) {
		return SignerRef{}, errs.Errorf(errs.Invalid, "%q is not a signer written chain_id:0xaddress", s)
	}
	return SignerRef{ChainID: id, Address: common.HexToAddress(addr)}, nil
}

// Tenant is a customer of the deployment: it owns signers and keys.
type Tenant struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// SignerStrings writes signers as SignerRef.String does, nil for none.
func SignerStrings(signers []SignerRef) []string {
	if len(signers) == 0 {
		return nil
	}
	out := make([]string, len(signers))
	for i, s := range signers {
		out[i] = s.String()
	}
	return out
}
