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
// "31337=http://127.0.0.1:8545,1=https://…,1=https://…": a chain named
// several times has several endpoints, a provider pool (package rpcpool).
// The ledger reads receipts and balances from these, not from
// txmanager's nodes: it checks what it books.
type ChainRPCs map[uint64][]string

// UnmarshalText parses id=url pairs, naming every bad one.
func (c *ChainRPCs) UnmarshalText(text []byte) error {
	out := ChainRPCs{}
	err := parseChainPairs(text, "URL", redact, func(chainID uint64, raw string) error {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("chain %d: %q is not an http(s) URL", chainID, redact(raw))
		}
		if slices.Contains(out[chainID], raw) {
			return fmt.Errorf("chain %d: %s given twice", chainID, redact(raw))
		}
		out[chainID] = append(out[chainID], raw)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = errors.New("no chain endpoint")
	}
	if err != nil {
		return err
	}
	*c = out
	return nil
}

// parseChainPairs calls value for each CHAIN_ID=VALUE item of a
// comma-separated list, and joins every problem, the malformed items'
// included; show hides what an item must not reveal in an error (an
// endpoint's key).
func parseChainPairs(text []byte, what string, show func(string) string, value func(chainID uint64, raw string) error) error {
	var problems []error
	for item := range strings.SplitSeq(string(text), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, raw, ok := strings.Cut(item, "=")
		chainID, err := strconv.ParseUint(id, 10, 63)
		if !ok || err != nil || chainID == 0 {
			problems = append(problems, fmt.Errorf("%q: want CHAIN_ID=%s", show(item), what))
			continue
		}
		if err := value(chainID, raw); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// shown shows an item as it is.
func shown(s string) string { return s }

// String shows the endpoints without their paths and queries, where
// providers put API keys.
func (c ChainRPCs) String() string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(c)) {
		for _, u := range c[id] {
			parts = append(parts, fmt.Sprintf("%d=%s", id, redact(u)))
		}
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
	err := parseChainPairs(text, "0xADDRESS", shown, func(chainID uint64, raw string) error {
		if !common.IsHexAddress(raw) || !strings.HasPrefix(raw, "0x") {
			return fmt.Errorf("chain %d: %q is not a 0x address of 40 hex digits", chainID, raw)
		}
		addr := common.HexToAddress(raw)
		if slices.Contains(out[chainID], addr) {
			return fmt.Errorf("chain %d: %s given twice", chainID, addr.Hex())
		}
		out[chainID] = append(out[chainID], addr)
		return nil
	})
	if err != nil {
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
	err := parseChainPairs(text, "BLOCK", shown, func(chainID uint64, raw string) error {
		block, err := strconv.ParseUint(raw, 10, 63)
		if err != nil {
			return fmt.Errorf("chain %d: %q is not a block number", chainID, raw)
		}
		if _, dup := out[chainID]; dup {
			return fmt.Errorf("chain %d: given twice", chainID)
		}
		out[chainID] = block
		return nil
	})
	if err != nil {
		return err
	}
	*c = out
	return nil
}
