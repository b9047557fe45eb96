package ledgerd

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// ChainRPCs are the ledger's own chain endpoints by chain id, from
// "31337=http://127.0.0.1:8545,1=https://…". The ledger reads receipts and
// balances from these, not from txmanager's nodes: it checks what it books.
type ChainRPCs map[uint64]string

// UnmarshalText parses id=url pairs, naming every bad one.
func (c *ChainRPCs) UnmarshalText(text []byte) error {
	out := ChainRPCs{}
	var problems []error
	for item := range strings.SplitSeq(string(text), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, raw, ok := strings.Cut(item, "=")
		chainID, err := strconv.ParseUint(id, 10, 63)
		if !ok || err != nil || chainID == 0 {
			problems = append(problems, fmt.Errorf("%q: want CHAIN_ID=URL", redact(item)))
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
			problems = append(problems, fmt.Errorf("chain %d: %q is not an http(s) or ws(s) URL", chainID, redact(raw)))
			continue
		}
		if _, dup := out[chainID]; dup {
			problems = append(problems, fmt.Errorf("chain %d: given twice", chainID))
			continue
		}
		out[chainID] = raw
	}
	if len(out) == 0 && len(problems) == 0 {
		problems = append(problems, errors.New("no chain endpoint"))
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	*c = out
	return nil
}

// String shows the endpoints without their paths and queries, where
// providers put API keys.
func (c ChainRPCs) String() string {
	parts := make([]string, 0, len(c))
	for _, id := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%d=%s", id, redact(c[id])))
	}
	return strings.Join(parts, ",")
}

// redact keeps a URL's scheme and host.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		if u.Path == "" && u.RawQuery == "" && u.User == nil {
			return u.Scheme + "://" + u.Host
		}
		return u.Scheme + "://" + u.Host + "/…"
	}
	return "…"
}

// ChainAddresses are addresses by chain id, from
// "31337=0xabc…,31337=0xdef…,1=0x123…": the tokens the ledger opens and
// reconciles, or the wallets it books besides txmanager's signers.
type ChainAddresses map[uint64][]common.Address

// UnmarshalText parses id=address pairs, naming every bad one; an address
// given twice for one chain is refused, as a sign of a mistaken list.
func (c *ChainAddresses) UnmarshalText(text []byte) error {
	out := ChainAddresses{}
	seen := map[uint64]map[common.Address]bool{}
	var problems []error
	for item := range strings.SplitSeq(string(text), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, raw, ok := strings.Cut(item, "=")
		chainID, err := strconv.ParseUint(id, 10, 63)
		if !ok || err != nil || chainID == 0 {
			problems = append(problems, fmt.Errorf("%q: want CHAIN_ID=0xADDRESS", item))
			continue
		}
		if !common.IsHexAddress(raw) || !strings.HasPrefix(raw, "0x") {
			problems = append(problems, fmt.Errorf("chain %d: %q is not a 0x address of 40 hex digits", chainID, raw))
			continue
		}
		addr := common.HexToAddress(raw)
		if seen[chainID][addr] {
			problems = append(problems, fmt.Errorf("chain %d: %s given twice", chainID, addr.Hex()))
			continue
		}
		if seen[chainID] == nil {
			seen[chainID] = map[common.Address]bool{}
		}
		seen[chainID][addr] = true
		out[chainID] = append(out[chainID], addr)
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	*c = out
	return nil
}

// String lists the addresses as they are parsed, chains in order.
func (c ChainAddresses) String() string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(c)) {
		for _, a := range c[id] {
			parts = append(parts, fmt.Sprintf("%d=%s", id, strings.ToLower(a.Hex())))
		}
	}
	return strings.Join(parts, ",")
}

// ChainBlocks are block numbers by chain id, from "31337=0,1=21000000".
type ChainBlocks map[uint64]uint64

// UnmarshalText parses id=block pairs, naming every bad one.
func (c *ChainBlocks) UnmarshalText(text []byte) error {
	out := ChainBlocks{}
	var problems []error
	for item := range strings.SplitSeq(string(text), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, raw, ok := strings.Cut(item, "=")
		chainID, err := strconv.ParseUint(id, 10, 63)
		if !ok || err != nil || chainID == 0 {
			problems = append(problems, fmt.Errorf("%q: want CHAIN_ID=BLOCK", item))
			continue
		}
		block, err := strconv.ParseUint(raw, 10, 63)
		if err != nil {
			problems = append(problems, fmt.Errorf("chain %d: %q is not a block number", chainID, raw))
			continue
		}
		if _, dup := out[chainID]; dup {
			problems = append(problems, fmt.Errorf("chain %d: given twice", chainID))
			continue
		}
		out[chainID] = block
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	*c = out
	return nil
}
