// Package devrelay is a LOCAL DEVELOPMENT RELAY: a stand-in for a
// Flashbots-style private relay in front of an anvil node, for `make run`
// and for tests. It is not a relay and must never be deployed as one: it
// protects nothing from MEV, simulates nothing, talks to no builder, and
// keeps everything in memory.
//
// What it does do is keep the promise the private route depends on, so
// that code written against it behaves as it would against a real relay:
// a private transaction is held in the relay's own memory and never given
// to the node until the relay builds a block. The node is anvil started
// with automine off (--no-mining); BuildBlock sends the held transactions
// and mines one block at once, under one lock, then takes back out of the
// node's pool whatever was not mined, so a private transaction sits in
// anvil's public pool only for that instant. Public transactions sent
// straight to anvil are mined in the same blocks, as a builder would.
//
// It serves, over JSON-RPC with the X-Flashbots-Signature header checked
// on every call (403 and {"error": "..."} otherwise, as Flashbots does):
// eth_sendPrivateTransaction, eth_cancelPrivateTransaction, mev_sendBundle
// and eth_sendBundle; and GET /tx/<hash>, the Flashbots Protect status API.
//
// Limits, by design: bundle transactions land in one block but not
// necessarily next to each other (anvil orders its pool itself); revert
// protection (canRevert, revertingTxHashes) is not enforced, a reverting
// transaction is mined as on a plain node; privacy hints, builders,
// refunds and replacementUuid are accepted and ignored; bundles that
// backrun another transaction by hash, nested bundles and blob
// transactions are refused.
package devrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// DefaultBlocks is how many blocks a private transaction sent without
// maxBlockNumber is offered for, and the furthest ahead a maxBlockNumber
// may reach (a later one is lowered to it), as Flashbots Protect does.
const DefaultBlocks = 25

// nodeTimeout bounds the node calls that must complete once a build has
// started, even if the caller's context ends: a private transaction left
// in the node's pool would be public.
const nodeTimeout = 30 * time.Second

// maxRequest bounds a request body. Flashbots limits a bundle to 300,000
// bytes of transactions; hex doubles that.
const maxRequest = 2 << 20

// Options configure a Relay.
type Options struct {
	// NodeURL is the JSON-RPC URL of the anvil node, started with
	// automine off (--no-mining): the relay mines its blocks.
	NodeURL string
	// ChainID is the node's chain id; transactions for another chain, or
	// without one, are refused.
	ChainID uint64
	// AllowedSigners are the relay identities (X-Flashbots-Signature
	// addresses) that may call it; empty means any. The signature is
	// verified either way.
	AllowedSigners []common.Address
	// Logger receives what the relay holds, mines and drops; nil discards.
	Logger *slog.Logger
}

// Relay is the development relay: an http.Handler for its API, and
// BuildBlock, which mines. Create it with New and Close it.
type Relay struct {
	chainID *big.Int
	signer  types.Signer
	allowed map[common.Address]bool
	log     *slog.Logger
	rpc     *rpc.Client
	eth     *ethclient.Client
	mux     *http.ServeMux
	now     func() time.Time

	// mu guards the state below and is held for a whole BuildBlock, so
	// no order is accepted or cancelled between being chosen for a block
	// and being mined.
	mu      sync.Mutex
	pending []*order                  // waiting for a block, in arrival order
	txs     map[common.Hash]*txRecord // every transaction ever held, for /tx
	bundles map[common.Hash]*order    // by bundle hash, for repeated sends
}

var _ http.Handler = (*Relay)(nil)

type orderKind int

const (
	privateTx orderKind = iota
	mevBundle
	ethBundle
)

func (k orderKind) String() string {
	return [...]string{"private transaction", "mev bundle", "eth bundle"}[k]
}

// order is what waits for a block: a private transaction, or a bundle
// whose transactions go into one block together or not at all.
type order struct {
	kind        orderKind
	hash        common.Hash // the transaction hash, or the bundle hash
	txs         []*txRecord
	first, last uint64 // blocks it may be mined in, both included
	minTime     uint64 // unix seconds; 0: none (eth_sendBundle)
	maxTime     uint64
	signer      common.Address // the relay identity that sent it
	done        bool
}

// txRecord is one transaction the relay holds or held.
type txRecord struct {
	tx       *types.Transaction
	raw      []byte
	from     common.Address
	order    *order
	state    flashbots.State
	block    uint64 // when INCLUDED
	fast     bool
	simError string // why the node last refused or did not mine it
	reverted bool
}

// New returns a relay for the node at opts.NodeURL. It does not contact
// the node: requests and BuildBlock do.
func New(opts Options) (*Relay, error) {
	if opts.NodeURL == "" {
		return nil, errors.New("devrelay: NodeURL is required")
	}
	if opts.ChainID == 0 {
		return nil, errors.New("devrelay: ChainID is required")
	}
	client, err := rpc.DialHTTP(opts.NodeURL)
	if err != nil {
		return nil, fmt.Errorf("devrelay: node %s: %w", opts.NodeURL, err)
	}
	chainID := new(big.Int).SetUint64(opts.ChainID)
	r := &Relay{
		chainID: chainID,
		signer:  types.LatestSignerForChainID(chainID),
		log:     opts.Logger,
		rpc:     client,
		eth:     ethclient.NewClient(client),
		now:     time.Now,
		txs:     map[common.Hash]*txRecord{},
		bundles: map[common.Hash]*order{},
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if len(opts.AllowedSigners) > 0 {
		r.allowed = map[common.Address]bool{}
		for _, a := range opts.AllowedSigners {
			r.allowed[a] = true
		}
	}
	r.mux = http.NewServeMux()
	r.mux.HandleFunc("POST /{$}", r.serveRPC)
	r.mux.HandleFunc("GET /tx/{hash}", r.serveStatus)
	return r, nil
}

// ServeHTTP serves the JSON-RPC API on POST / and the status API on
// GET /tx/<hash>.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Close closes the connection to the node. Transactions still held are
// never sent.
func (r *Relay) Close() { r.rpc.Close() }

// Run builds a block every interval until ctx ends, which is how the
// local stack gets blocks: its anvil does not mine by itself. A failed
// build is logged and the next one tried.
func (r *Relay) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("devrelay: block interval %s: want a positive interval", every)
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if _, _, err := r.BuildBlock(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("build block", "err", err)
		}
	}
}
