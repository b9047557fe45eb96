// Package anvil runs Foundry's anvil, a local EVM node, as a child process
// for tests (through chaintest) and for the local stack. The binary is the
// pinned Version, installed into the repository by
// deploy/scripts/install-anvil.sh, so every developer, CI and the stack run
// the same node. It is never used in production.
//
// The node's RPC helpers wrap anvil's test-only methods (mining, reorgs,
// pool surgery) so tests do not spell method names and parameter shapes,
// some of which are surprising (see Reorg).
package anvil

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/testinfra/pinned"
)

// Version is the anvil release the project pins; deploy/scripts/install-anvil.sh
// installs the same one.
const Version = "1.7.1"

// DefaultMnemonic is anvil's own default, so the dev accounts are the
// well-known ones (0xf39F…2266 first) that every Foundry user recognises.
const DefaultMnemonic = "test test test test test test test test test test test junk"

const (
	// DefaultChainID is what anvil uses when no chain id is given.
	DefaultChainID = 31337

	startTimeout = 30 * time.Second
	stopGrace    = 10 * time.Second
	// stateStopGrace is the grace of a node with a StateFile: anvil writes
	// the whole chain when it exits, and a node killed in the middle
	// loses it.
	stateStopGrace = time.Minute
	installTimeout = 5 * time.Minute
	pollInterval   = 20 * time.Millisecond
)

// binary is the pinned anvil: $TXFENCE_ANVIL when set, else the install
// under <repo root>/.tools, installed on first use by
// deploy/scripts/install-anvil.sh (once per process).
var binary = pinned.Binary{
	Name: "anvil", Version: Version, Env: "TXFENCE_ANVIL",
	Installed: []string{".tools", "anvil", Version, "node_modules", "@foundry-rs", "anvil-linux-amd64", "bin", "anvil"},
	Script:    filepath.Join("deploy", "scripts", "install-anvil.sh"),
	Timeout:   installTimeout,
}

// Find returns the anvil binary to run: $TXFENCE_ANVIL when set, else the
// pinned install under <repo root>/.tools, which is installed on first use
// by running deploy/scripts/install-anvil.sh (once per process).
func Find() (string, error) { return binary.Find() }

// Options configure a node. The zero value is a node like anvil's defaults
// on a free loopback port, with output discarded.
type Options struct {
	ChainID   uint64        // 0: DefaultChainID
	Port      int           // 0: a free port, chosen by anvil itself
	BlockTime time.Duration // 0: mine a block per transaction (automine)
	NoMining  bool          // mine only on Mine; excludes BlockTime
	Accounts  int           // funded dev accounts; 0: 10
	Balance   uint64        // of each dev account, in ether; 0: 10000
	Mnemonic  string        // for the dev accounts; "": DefaultMnemonic
	// StateFile keeps the chain between runs (--state): anvil loads it at
	// start when it exists and writes it when it stops. A relative path is
	// taken from this process's working directory, not anvil's, which is a
	// temporary directory removed at Stop.
	StateFile string
	ExtraArgs []string  // appended to anvil's command line; paths in it must be absolute
	Output    io.Writer // anvil's stdout and stderr, and should not block; nil: discarded
}

// Account is a funded dev account. Its key is a well-known test key: it
// must never hold value on a real chain.
type Account struct {
	Address common.Address
	Key     *ecdsa.PrivateKey
}

// Node is a running anvil. Stop it: it is a child process, and although it
// is killed with this process on Linux, a node left running in a long-lived
// process holds its port.
type Node struct {
	cmd      *exec.Cmd
	url      string
	chainID  uint64
	accounts []Account
	rpc      *rpc.Client
	eth      *ethclient.Client
	dir      string // holds the --config-out file
	out      *output

	done    chan struct{} // closed when the process has been reaped
	waitErr error         // set before done is closed

	grace    time.Duration // between SIGTERM and SIGKILL
	stopOnce sync.Once
	stopErr  error
}

// Start runs anvil with opts and returns once it answers eth_chainId. ctx
// bounds the start only; the node runs until Stop. It listens on 127.0.0.1
// only, in its own process group, so a Ctrl-C at the terminal reaches the
// launcher, which stops it in order.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.NoMining && opts.BlockTime > 0 {
		return nil, errors.New("start anvil: NoMining and BlockTime exclude each other")
	}
	for _, a := range opts.ExtraArgs {
		// The address is read from the "Listening on" line, which these hide.
		if a == "-q" || a == "--quiet" {
			return nil, fmt.Errorf("start anvil: ExtraArgs may not contain %s; leave Output nil to discard the output", a)
		}
	}
	if err := absolutePaths(opts.ExtraArgs); err != nil {
		return nil, fmt.Errorf("start anvil: %w", err)
	}
	if opts.StateFile != "" {
		abs, err := filepath.Abs(opts.StateFile)
		if err != nil {
			return nil, fmt.Errorf("start anvil: state file: %w", err)
		}
		opts.StateFile = abs
	}
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "txfence-anvil-")
	if err != nil {
		return nil, fmt.Errorf("start anvil: %w", err)
	}
	n, err := start(ctx, bin, dir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return n, nil
}

func start(ctx context.Context, bin, dir string, opts Options) (*Node, error) {
	configOut := filepath.Join(dir, "anvil.json")
	args := []string{
		"--host", "127.0.0.1",
		// Port 0 lets anvil bind a free port itself, which it then prints:
		// no window in which another process can take a port chosen here.
		"--port", strconv.Itoa(opts.Port),
		"--config-out", configOut,
		"--accounts", strconv.Itoa(cmp.Or(opts.Accounts, 10)),
		"--balance", strconv.FormatUint(cmp.Or(opts.Balance, 10000), 10),
		"--mnemonic", cmp.Or(opts.Mnemonic, DefaultMnemonic),
		"--color", "never",
	}
	if opts.ChainID != 0 {
		args = append(args, "--chain-id", strconv.FormatUint(opts.ChainID, 10))
	}
	if opts.BlockTime > 0 {
		// Seconds as a decimal: anvil accepts fractions (0.5).
		args = append(args, "--block-time", strconv.FormatFloat(opts.BlockTime.Seconds(), 'f', -1, 64))
	}
	if opts.NoMining {
		args = append(args, "--no-mining")
	}
	if opts.StateFile != "" {
		args = append(args, "--state", opts.StateFile)
	}
	args = append(args, opts.ExtraArgs...)

	out := newOutput(opts.Output)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out // one writer: exec then writes from one goroutine
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// A test binary killed by its timeout, or a launcher that dies,
		// takes the node with it instead of leaving it on its port. (Linux
		// only, as is the binary. The signal follows the starting thread,
		// which the Go runtime keeps for as long as the process lives.)
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.WaitDelay = stopGrace // bounds Wait should a descendant hold the output pipe
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start anvil %s: %w", bin, err)
	}
	n := &Node{cmd: cmd, dir: dir, out: out, done: make(chan struct{}), grace: stopGrace}
	if opts.StateFile != "" {
		n.grace = stateStopGrace
	}
	go func() {
		n.waitErr = cmd.Wait()
		close(n.done)
	}()

	if err := n.ready(ctx, opts, configOut); err != nil {
		_ = n.Stop()
		return nil, fmt.Errorf("start %s: %w", commandLine(bin, args), err)
	}
	return n, nil
}

// fileFlags are the anvil options that name a file of the chain.
var fileFlags = []string{"--state", "--load-state", "--dump-state"}

// absolutePaths refuses a relative path given to a file option in args:
// anvil runs in a temporary directory, removed at Stop, where a relative
// path would land, and be lost (a --state chain starting afresh every run).
func absolutePaths(args []string) error {
	for i, a := range args {
		for _, f := range fileFlags {
			var path string
			switch {
			case a == f && i+1 < len(args):
				path = args[i+1]
			case strings.HasPrefix(a, f+"="):
				path = strings.TrimPrefix(a, f+"=")
			default:
				continue
			}
			if !filepath.IsAbs(path) {
				return fmt.Errorf("%s %s: a relative path would be anvil's temporary working directory's, removed at Stop; give an absolute path (or Options.StateFile, which resolves it)", f, path)
			}
		}
	}
	return nil
}

// commandLine quotes what needs it, so the mnemonic reads as one argument.
func commandLine(bin string, args []string) string {
	parts := []string{filepath.Base(bin)}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// ready waits for the listening address, then for eth_chainId, then reads
// the dev accounts.
func (n *Node) ready(ctx context.Context, opts Options, configOut string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var addr string
	select {
	case addr = <-n.out.listening:
	case <-n.done:
		return fmt.Errorf("anvil exited: %v; output: %s", n.waitErr, n.out.tail())
	case <-ctx.Done():
		return fmt.Errorf("no \"Listening on\" line from anvil: %w; output: %s", ctx.Err(), n.out.tail())
	}
	n.url = "http://" + addr
	var err error
	if n.rpc, err = rpc.DialContext(ctx, n.url); err != nil {
		return fmt.Errorf("dial %s: %w", n.url, err)
	}
	n.eth = ethclient.NewClient(n.rpc)

	var chainID hexutil.Uint64
	for {
		callCtx, cancelCall := context.WithTimeout(ctx, time.Second)
		err = n.rpc.CallContext(callCtx, &chainID, "eth_chainId")
		cancelCall()
		if err == nil {
			break
		}
		select {
		case <-n.done:
			return fmt.Errorf("anvil exited: %v; output: %s", n.waitErr, n.out.tail())
		case <-ctx.Done():
			return fmt.Errorf("eth_chainId at %s: %w (last error: %v)", n.url, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
	if want := cmp.Or(opts.ChainID, DefaultChainID); uint64(chainID) != want {
		return fmt.Errorf("%s answers chain id %d, want %d", n.url, chainID, want)
	}
	n.chainID = uint64(chainID)

	if n.accounts, err = readAccounts(configOut); err != nil {
		return err
	}
	var listed []common.Address
	if err := n.rpc.CallContext(ctx, &listed, "eth_accounts"); err != nil {
		return fmt.Errorf("eth_accounts: %w", err)
	}
	if len(listed) != len(n.accounts) {
		return fmt.Errorf("eth_accounts lists %d accounts, %s holds %d keys", len(listed), configOut, len(n.accounts))
	}
	for i, a := range n.accounts {
		if listed[i] != a.Address {
			return fmt.Errorf("eth_accounts[%d] is %s, %s has the key of %s", i, listed[i], configOut, a.Address)
		}
	}
	return nil
}

// readAccounts takes the dev keys from anvil's --config-out file: deriving
// them here would need a BIP-39/BIP-32 implementation that go-ethereum does
// not have, and anvil is the authority on what it funded anyway.
func readAccounts(configOut string) ([]Account, error) {
	b, err := os.ReadFile(configOut)
	if err != nil {
		return nil, fmt.Errorf("read anvil's accounts: %w", err)
	}
	var cfg struct {
		Accounts []common.Address `json:"available_accounts"`
		Keys     []string         `json:"private_keys"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("parse %s: %w", configOut, err)
	}
	if len(cfg.Accounts) != len(cfg.Keys) {
		return nil, fmt.Errorf("%s lists %d accounts and %d keys", configOut, len(cfg.Accounts), len(cfg.Keys))
	}
	accounts := make([]Account, len(cfg.Keys))
	for i, hexKey := range cfg.Keys {
		key, err := crypto.HexToECDSA(strings.TrimPrefix(hexKey, "0x"))
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", configOut, i, err)
		}
		if addr := crypto.PubkeyToAddress(key.PublicKey); addr != cfg.Accounts[i] {
			return nil, fmt.Errorf("%s: key %d is for %s, listed as %s", configOut, i, addr, cfg.Accounts[i])
		}
		accounts[i] = Account{Address: cfg.Accounts[i], Key: key}
	}
	return accounts, nil
}

// URL is the node's HTTP JSON-RPC endpoint, http://127.0.0.1:<port>.
func (n *Node) URL() string { return n.url }

// ChainID is the chain id the node answered with.
func (n *Node) ChainID() uint64 { return n.chainID }

// Accounts are the funded dev accounts, in anvil's order.
func (n *Node) Accounts() []Account { return append([]Account(nil), n.accounts...) }

// PID is the process id of anvil, which also leads its process group.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// RPC is the node's JSON-RPC client, for methods without a helper here.
// Stop closes it.
func (n *Node) RPC() *rpc.Client { return n.rpc }

// Client is an ethclient over RPC.
func (n *Node) Client() *ethclient.Client { return n.eth }

// Done is closed when the anvil process has exited, whether through Stop
// or not; Stop then says why.
func (n *Node) Done() <-chan struct{} { return n.done }

// Stop ends anvil: SIGTERM to its process group, then SIGKILL if it has not
// exited within 10 s (a minute with a StateFile, which anvil writes as it
// exits). It returns once the process is gone, and an error if
// it had to be killed or had died before Stop. Calling it again returns the
// first result.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.stopErr = n.stop()
	})
	return n.stopErr
}

func (n *Node) stop() error {
	if n.rpc != nil {
		n.rpc.Close()
	}
	defer os.RemoveAll(n.dir)
	pid := n.cmd.Process.Pid
	select {
	case <-n.done:
		return fmt.Errorf("anvil (pid %d) exited before Stop: %v; output: %s", pid, n.waitErr, n.out.tail())
	default:
	}
	// The group, not the pid: nothing anvil might start outlives it.
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop anvil (pid %d): %w", pid, err)
	}
	timer := time.NewTimer(n.grace)
	defer timer.Stop()
	select {
	case <-n.done:
		return nil
	case <-timer.C:
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-n.done
	return fmt.Errorf("anvil (pid %d) ignored SIGTERM for %s and was killed", pid, n.grace)
}

// Mine mines blocks right away, with or without automine, each holding
// what the pool offers (anvil_mine).
func (n *Node) Mine(ctx context.Context, blocks int) error {
	if blocks < 1 {
		return fmt.Errorf("mine %d blocks: want at least one", blocks)
	}
	if err := n.rpc.CallContext(ctx, nil, "anvil_mine", hexutil.Uint64(blocks)); err != nil {
		return fmt.Errorf("mine %d blocks: %w", blocks, err)
	}
	return nil
}

// Reorg replaces the top depth blocks with as many new, empty ones, so the
// height stays and the hashes at those heights change (anvil_reorg).
// Transactions in the replaced blocks are gone: anvil neither re-includes
// them nor returns them to the pool, so they have no receipt and their
// senders' nonces go back. depth may not exceed the height.
func (n *Node) Reorg(ctx context.Context, depth int) error {
	if depth < 1 {
		return fmt.Errorf("reorg depth %d: want at least one", depth)
	}
	// anvil wants the depth as a JSON number: a hex quantity is refused
	// ("expected u64"). The second parameter lists [tx, block offset]
	// pairs to mine into the new blocks.
	if err := n.rpc.CallContext(ctx, nil, "anvil_reorg", uint64(depth), []any{}); err != nil {
		return fmt.Errorf("reorg depth %d: %w", depth, err)
	}
	return nil
}

// DropTransaction removes a transaction from the pool
// (anvil_dropTransaction) and reports whether it was there.
func (n *Node) DropTransaction(ctx context.Context, hash common.Hash) (bool, error) {
	var dropped *common.Hash
	if err := n.rpc.CallContext(ctx, &dropped, "anvil_dropTransaction", hash); err != nil {
		return false, fmt.Errorf("drop transaction %s: %w", hash, err)
	}
	return dropped != nil, nil
}

// TxPool is the content of the node's transaction pool, by sender and
// nonce, as geth's txpool_content reports it.
type TxPool struct {
	Pending map[common.Address]map[uint64]PoolTx `json:"pending"`
	Queued  map[common.Address]map[uint64]PoolTx `json:"queued"` // nonce gaps
}

// PoolTx is a transaction waiting in the pool, as anvil reports it. It is
// not a types.Transaction: for an impersonated sender anvil fakes the
// signature (r = s = 0) and reports a hash of its own, so a decoded
// types.Transaction would have another hash and no recoverable sender.
type PoolTx struct {
	Hash      common.Hash
	Type      uint64
	From      common.Address
	To        *common.Address // nil for a contract creation
	Nonce     uint64
	Gas       uint64
	Value     *big.Int
	GasFeeCap *big.Int // maxFeePerGas; the gas price of a legacy transaction
	GasTipCap *big.Int // maxPriorityFeePerGas; nil for a legacy transaction
	Input     []byte
}

// UnmarshalJSON reads the RPC form of a transaction.
func (p *PoolTx) UnmarshalJSON(b []byte) error {
	var j struct {
		Hash                 common.Hash     `json:"hash"`
		Type                 hexutil.Uint64  `json:"type"`
		From                 common.Address  `json:"from"`
		To                   *common.Address `json:"to"`
		Nonce                hexutil.Uint64  `json:"nonce"`
		Gas                  hexutil.Uint64  `json:"gas"`
		Value                *hexutil.Big    `json:"value"`
		GasPrice             *hexutil.Big    `json:"gasPrice"`
		MaxFeePerGas         *hexutil.Big    `json:"maxFeePerGas"`
		MaxPriorityFeePerGas *hexutil.Big    `json:"maxPriorityFeePerGas"`
		Input                hexutil.Bytes   `json:"input"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = PoolTx{
		Hash: j.Hash, Type: uint64(j.Type), From: j.From, To: j.To,
		Nonce: uint64(j.Nonce), Gas: uint64(j.Gas), Value: (*big.Int)(j.Value),
		GasFeeCap: (*big.Int)(j.GasPrice), Input: j.Input,
	}
	if j.MaxFeePerGas != nil {
		p.GasFeeCap = (*big.Int)(j.MaxFeePerGas)
		p.GasTipCap = (*big.Int)(j.MaxPriorityFeePerGas)
	}
	return nil
}

// All lists the pending transactions, then the queued ones, each by sender
// and nonce in no particular order.
func (p *TxPool) All() []PoolTx {
	var all []PoolTx
	for _, part := range []map[common.Address]map[uint64]PoolTx{p.Pending, p.Queued} {
		for _, byNonce := range part {
			for _, tx := range byNonce {
				all = append(all, tx)
			}
		}
	}
	return all
}

// Contains reports whether the pool holds the transaction, pending or
// queued.
func (p *TxPool) Contains(hash common.Hash) bool {
	for _, tx := range p.All() {
		if tx.Hash == hash {
			return true
		}
	}
	return false
}

// TxPoolContent returns what the pool holds (txpool_content).
func (n *Node) TxPoolContent(ctx context.Context) (*TxPool, error) {
	var pool TxPool
	if err := n.rpc.CallContext(ctx, &pool, "txpool_content"); err != nil {
		return nil, fmt.Errorf("txpool content: %w", err)
	}
	return &pool, nil
}

// SetAutomine turns mining a block per transaction on or off
// (evm_setAutomine). Off also stops interval mining (BlockTime); turning
// it on does not mine what is already in the pool: call Mine for that.
func (n *Node) SetAutomine(ctx context.Context, on bool) error {
	if err := n.rpc.CallContext(ctx, nil, "evm_setAutomine", on); err != nil {
		return fmt.Errorf("set automine %t: %w", on, err)
	}
	return nil
}

// SetBalance sets an account's balance in wei (anvil_setBalance).
func (n *Node) SetBalance(ctx context.Context, addr common.Address, wei *big.Int) error {
	if err := n.rpc.CallContext(ctx, nil, "anvil_setBalance", addr, (*hexutil.Big)(wei)); err != nil {
		return fmt.Errorf("set balance of %s: %w", addr, err)
	}
	return nil
}

// SetNextBlockBaseFee sets the base fee of the next block in wei
// (anvil_setNextBlockBaseFeePerGas); later blocks follow EIP-1559 from it.
func (n *Node) SetNextBlockBaseFee(ctx context.Context, wei *big.Int) error {
	if err := n.rpc.CallContext(ctx, nil, "anvil_setNextBlockBaseFeePerGas", (*hexutil.Big)(wei)); err != nil {
		return fmt.Errorf("set next block base fee: %w", err)
	}
	return nil
}

// BlockNumber is the height of the chain's head.
func (n *Node) BlockNumber(ctx context.Context) (uint64, error) {
	num, err := n.eth.BlockNumber(ctx)
	if err != nil {
		return 0, fmt.Errorf("block number: %w", err)
	}
	return num, nil
}

// output passes anvil's output on, spots the "Listening on" line and keeps
// the last few kilobytes for error messages.
type output struct {
	w         io.Writer
	listening chan string // receives the first listening address

	mu      sync.Mutex
	partial []byte // an unfinished line
	last    []byte
	found   bool
}

const tailSize = 4 << 10

func newOutput(w io.Writer) *output {
	if w == nil {
		w = io.Discard
	}
	return &output{w: w, listening: make(chan string, 1)}
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	o.last = append(o.last, b...)
	if len(o.last) > tailSize {
		o.last = append(o.last[:0], o.last[len(o.last)-tailSize:]...)
	}
	if !o.found {
		o.partial = append(o.partial, b...)
		for {
			i := bytes.IndexByte(o.partial, '\n')
			if i < 0 {
				break
			}
			line := strings.TrimSpace(string(o.partial[:i]))
			o.partial = o.partial[i+1:]
			// "Listening on 127.0.0.1:8545"; with several hosts the
			// addresses are comma-separated, but Start passes one.
			if rest, ok := strings.CutPrefix(line, "Listening on "); ok {
				addr, _, _ := strings.Cut(rest, ",")
				if _, _, err := net.SplitHostPort(addr); err == nil {
					o.found = true
					o.partial = nil
					o.listening <- addr
					break
				}
			}
		}
	}
	o.mu.Unlock()
	// An Output that fails must not stop anvil: it would block or die on
	// a broken pipe.
	_, _ = o.w.Write(b)
	return len(b), nil
}

func (o *output) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.TrimSpace(string(o.last))
}
