package mevrouterd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/mev-router/relay"
)

// ChainsFile is the CHAINS_FILE: every chain one mevrouterd serves, each
// with its own public endpoints, relays and watched node. What is the same
// for every chain (the relay key, timeouts, circuit breakers, the auto
// rule) stays in the environment.
type ChainsFile struct {
	Chains []Chain `json:"chains"`
}

// Chain is one chain's routes.
type Chain struct {
	ChainID uint64 `json:"chain_id"`
	// PublicRPC are the public endpoints; every transaction goes to all.
	PublicRPC []PublicEndpoint `json:"public_rpc"`
	// Relays are the private relays and builders; none disables the
	// private route on this chain.
	Relays []Relay `json:"relays,omitempty"`
	// WatchRPC is our own node of the chain, read for new blocks to see
	// private inclusions; empty means the first public endpoint.
	WatchRPC string `json:"watch_rpc,omitempty"`
	// PrivateBlocks is the default distance of a private send's max block
	// from the current block; zero means PRIVATE_BLOCKS.
	PrivateBlocks uint64 `json:"private_blocks,omitempty"`
}

// PublicEndpoint is one public RPC endpoint of a chain.
type PublicEndpoint struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// NoBatch: the endpoint takes no JSON-RPC batches, only one
	// transaction per request.
	NoBatch bool `json:"no_batch,omitempty"`
}

// Relay is one private relay or builder of a chain.
type Relay struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Kind is the relay's protocol; empty means protect.
	Kind relay.Kind `json:"kind,omitempty"`
}

// ParseChainsFile reads a chains file. Unknown fields and trailing data
// are refused; every problem is reported, each naming its chain and field.
// URLs, which often carry API keys, are never quoted past their host.
func ParseChainsFile(data []byte) (ChainsFile, error) {
	var f ChainsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return ChainsFile{}, fmt.Errorf("not a chains file (JSON: {\"chains\": [...]}): %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ChainsFile{}, errors.New("not a chains file: data after the JSON object")
	}
	if err := f.Check(); err != nil {
		return ChainsFile{}, err
	}
	for i := range f.Chains {
		if len(f.Chains[i].Relays) == 0 {
			f.Chains[i].Relays = nil // "relays": [] is no relay, as is no "relays"
		}
	}
	return f, nil
}

// Check reports every problem of the chains, each naming its chain and
// field.
func (f ChainsFile) Check() error {
	if len(f.Chains) == 0 {
		return errors.New("chains: at least one chain is needed")
	}
	var problems []error
	seen := map[uint64]int{}
	for i, c := range f.Chains {
		where := fmt.Sprintf("chains[%d]", i)
		if c.ChainID != 0 {
			where = fmt.Sprintf("chains[%d] (chain %d)", i, c.ChainID)
		}
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Errorf(where+": "+format, args...))
		}
		switch j, dup := seen[c.ChainID]; {
		case c.ChainID == 0:
			bad("chain_id: a positive chain id is needed")
		case dup:
			bad("chain_id: chain %d is chains[%d] already", c.ChainID, j)
		default:
			seen[c.ChainID] = i
		}
		if len(c.PublicRPC) == 0 {
			bad("public_rpc: at least one public endpoint is needed")
		}
		names := map[string]string{}
		checkEndpoint := func(field, name, url string) {
			if err := public.CheckName(name); err != nil {
				bad("%s.name: %v", field, err)
			} else if other, dup := names[name]; dup {
				bad("%s.name: %q is %s already", field, name, other)
			} else {
				names[name] = field
			}
			if err := public.CheckURL(url); err != nil {
				bad("%s.url: %v", field, err)
			}
		}
		for j, e := range c.PublicRPC {
			checkEndpoint(fmt.Sprintf("public_rpc[%d]", j), e.Name, e.URL)
		}
		for j, r := range c.Relays {
			field := fmt.Sprintf("relays[%d]", j)
			checkEndpoint(field, r.Name, r.URL)
			if r.Kind != "" && !slices.Contains(relay.Kinds, r.Kind) {
				bad("%s.kind: %q is not protect, mev-share or bundle", field, r.Kind)
			}
		}
		if c.WatchRPC != "" {
			if err := public.CheckURL(c.WatchRPC); err != nil {
				bad("watch_rpc: %v", err)
			}
		}
	}
	return errors.Join(problems...)
}

// endpoints are the chain's public endpoints and the names of those that
// take no batches.
func (c Chain) endpoints() (public.Endpoints, []string) {
	var es public.Endpoints
	var noBatch []string
	for _, e := range c.PublicRPC {
		es = append(es, public.Endpoint{Name: e.Name, URL: e.URL})
		if e.NoBatch {
			noBatch = append(noBatch, e.Name)
		}
	}
	return es, noBatch
}

// relayNames lists the chain's relays.
func (c Chain) relayNames() []string {
	names := make([]string, len(c.Relays))
	for i, r := range c.Relays {
		names[i] = r.Name
	}
	return names
}
