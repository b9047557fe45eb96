package devstack_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// webhookReceiver verifies every delivery's Standard Webhooks signature
// and keeps the state each transaction reached by webhook.
type webhookReceiver struct {
	mu      sync.Mutex
	verify  *standardwebhooks.Webhook
	states  map[string][]string // tx_id -> to_state of each state change, in order
	invalid []string
}

func (rc *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := rc.verify.Verify(body, r.Header); err != nil {
		rc.invalid = append(rc.invalid, err.Error())
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e struct {
		TxID string `json:"tx_id"`
		Type string `json:"type"`
		Data struct {
			ToState string `json:"to_state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Type == "tx.state_changed" {
		rc.states[e.TxID] = append(rc.states[e.TxID], e.Data.ToState)
	}
}

func (rc *webhookReceiver) reached(txID, state string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.states[txID] {
		if s == state {
			return true
		}
	}
	return false
}

// requireEndToEnd drives the whole stack through its front door, as a
// client would: with the admin key devstack made, it subscribes a webhook
// receiver, sends one transaction by the public route and one by the
// private route (the development relay) on the first chain and one by the
// public route on the second, waits for all three to be CONFIRMED
// through the gateway's API, and requires each CONFIRMED to arrive by
// webhook with a valid signature.
func requireEndToEnd(t *testing.T, gateway, adminKey string) (hashes []common.Hash) {
	t.Helper()
	call := gatewayAPI{t: t, url: gateway, key: adminKey}.do

	rc := &webhookReceiver{states: map[string][]string{}}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
	code, b := call("POST", "/api/v1/webhooks", `{"url": "`+receiver.URL+`/txfence", "event_types": ["tx.state_changed"]}`)
	var sub struct{ Secret string }
	if err := json.Unmarshal(b, &sub); err != nil || code != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", code, b)
	}
	verify, err := standardwebhooks.NewWebhook(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verify = verify
	rc.mu.Unlock()

	ids := map[string]string{}
	for _, send := range []struct {
		chainID uint64
		route   string
	}{{31337, "public"}, {31337, "private"}, {31338, "public"}} {
		body := fmt.Sprintf(`{"chain_id": %d, "from": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
			"to": "0x0000000000000000000000000000000000000b0b", "value": "1000", "route": %q}`, send.chainID, send.route)
		name := fmt.Sprintf("%s on chain %d", send.route, send.chainID)
		code, b := call("POST", "/api/v1/tx", body, "Idempotency-Key", fmt.Sprintf("e2e-%d-%s-%d", send.chainID, send.route, time.Now().UnixNano()))
		var tx struct {
			TxID string `json:"tx_id"`
		}
		if err := json.Unmarshal(b, &tx); err != nil || code != http.StatusCreated {
			t.Fatalf("create (%s): %d %s", name, code, b)
		}
		ids[name] = tx.TxID
	}
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for route, id := range ids {
		for {
			_, b := call("GET", "/api/v1/tx/"+id, "")
			var tx struct{ State, Route string }
			if err := json.Unmarshal(b, &tx); err != nil {
				t.Fatalf("get: %s", b)
			}
			if tx.State == "CONFIRMED" && rc.reached(id, "CONFIRMED") {
				break
			}
			if tx.State == "FAILED" || tx.State == "REVERTED" || tx.State == "CANCELLED" || time.Now().After(deadline) {
				rc.mu.Lock()
				t.Fatalf("%s transaction %s: %s; by webhook: %v", route, id, b, rc.states[id])
			}
			<-tick.C
		}
	}
	_, b = call("GET", "/api/v1/tx/"+ids["private on chain 31337"], "")
	if !strings.Contains(string(b), `"route":"private"`) {
		t.Errorf("the private transaction: %s", b)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.invalid) > 0 {
		t.Errorf("%d deliveries failed verification: %v", len(rc.invalid), rc.invalid)
	}
	for route, id := range ids {
		if got := rc.states[id]; len(got) == 0 || got[0] != "INIT" {
			t.Errorf("%s transaction's states by webhook: %v, want INIT first, in order", route, got)
		}
		_, b := call("GET", "/api/v1/tx/"+id, "")
		var tx struct{ Hash common.Hash }
		if err := json.Unmarshal(b, &tx); err != nil || tx.Hash == (common.Hash{}) {
			t.Fatalf("%s transaction's hash: %s", route, b)
		}
		hashes = append(hashes, tx.Hash)
	}
	return hashes
}

// requireBooked waits until the ledger (its database, databaseURL) has
// booked each transaction as confirmed, with a fee paid.
func requireBooked(t *testing.T, databaseURL string, hashes []common.Hash) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, h := range hashes {
		for {
			var fee *string
			err := conn.QueryRow(ctx, `
				SELECT sum(e.amount)::text FROM journal j JOIN entry e USING (journal_id) JOIN account a USING (account_id)
				WHERE j.tx_hash = $1 AND j.kind = 'confirmed' AND a.kind = 'fee_expense'`, h.Bytes()).Scan(&fee)
			if err != nil {
				t.Fatalf("read the ledger: %v", err)
			}
			if fee != nil && *fee != "0" && !strings.HasPrefix(*fee, "-") {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the ledger has not booked %s with its fee", h)
			case <-tick.C:
			}
		}
	}
}

// The ledger end to end: wallets, deposits, tokens, a revert and reorgs,
// then reconciliation with the chain.

// unbookedWei is what requireReconciled adds to a wallet's balance behind
// the ledger's back.
const unbookedWei = 123456789

// requireReconciled drives a mixed workload through the stack and proves
// the ledger's books against anvil. An outside account (no wallet pays
// it) deploys an ERC-20, mints to itself, and deposits native value and
// tokens straight to two wallets; wallets send through the gateway by the
// public and private routes, to the outsider, to each other, an ERC-20
// transfer and a call that reverts on chain (its simulation passes); a
// depth-2 reorg takes out a deposit and a txfence transaction just mined,
// txmanager sends its own again and the deposit is sent again; a deeper
// reorg takes out a deposit and a txfence transaction the ledger has
// booked already, which it reverses and books again from their new blocks.
// Once
// everything settled, a reconciliation finds every wallet tied out to the
// wei in every asset. Then a wallet's balance is raised without a
// transaction (anvil_setBalance), and the next reconciliation books
// exactly that to the wallet's suspense account as an inbound movement,
// which an operator's adjustment then explains, clearing suspense.
func requireReconciled(t *testing.T, gateway, adminKey, ledgerURL string, ledgerClient *http.Client, stateDir string) {
	t.Helper()
	chain := dialStackChain(t, stateDir)
	gw := gatewayAPI{t: t, url: gateway, key: adminKey}
	books := ledgerAPI{t: t, url: ledgerURL, client: ledgerClient}

	// Wallets: anvil's dev accounts, which txfence signs for (the ledger
	// books each from its first event in txmanager's feed). The first two
	// are the earlier checks'.
	var (
		payer    = devAccount(2) // pays the outsider, receives both deposits' native side
		holder   = devAccount(3) // pays payer privately, receives tokens, sends an ERC-20 transfer
		reverter = devAccount(4) // sends the call that reverts
		reorged  = devAccount(5) // sends the transaction the reorg takes out
	)
	outsiderKey, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	outsider := crypto.PubkeyToAddress(outsiderKey.PublicKey)
	chain.call(nil, "anvil_setBalance", outsider, (*hexutil.Big)(ether(100)))
	// GASPRICE ISZERO: a call at gas price 0 (eth_call, eth_estimateGas)
	// stops, a mined one, which pays for gas, reverts.
	revertsOnChain := common.HexToAddress("0x000000000000000000000000000000000000bad0")
	chain.call(nil, "anvil_setCode", revertsOnChain, hexutil.Bytes(common.FromHex("0x3a15600957600080fd5b00")))

	// txfence's transactions first: the wallets are opened, so the
	// deposits that follow are deposits, not part of an opening balance.
	sent := gw.sendAll(
		txRequest{name: "public payment to the outsider", from: payer, to: outsider, value: ether(1).String(), route: "public"},
		txRequest{name: "private payment between wallets", from: holder, to: payer, value: ether(2).String(), route: "private"},
		txRequest{name: "call reverted on chain", from: reverter, to: revertsOnChain, data: "0x", gas: 50_000, route: "public", reverts: true},
	)
	final := gw.waitFinal(chain, sent)
	books.waitOpened(payer, holder, reverter)

	// The outsider, straight to anvil: a token, and deposits of native
	// value and of tokens to two wallets.
	deploy := chain.mined(chain.sign(outsiderKey, nil, nil, token.DeployCalldata(), token.DeployGas))
	tok := deploy.ContractAddress
	chain.mined(chain.sign(outsiderKey, &tok, nil, token.MintCalldata(outsider, big.NewInt(1_000_000)), token.CallGas))
	deposits := []*types.Receipt{
		chain.mined(chain.sign(outsiderKey, &payer, ether(3), nil, params.TxGas)),
		chain.mined(chain.sign(outsiderKey, &tok, nil, token.TransferCalldata(holder, big.NewInt(1000)), token.CallGas)),
	}

	// A wallet's ERC-20 transfer, through txfence: calldata to the token.
	erc20 := gw.sendAll(txRequest{name: "ERC-20 transfer to the outsider", from: holder, to: tok,
		data: hexutil.Encode(token.TransferCalldata(outsider, big.NewInt(400))), route: "public"})
	maps.Copy(final, gw.waitFinal(chain, erc20))
	maps.Copy(sent, erc20)

	// A reorg of depth 2 once a deposit and a txfence transaction are both
	// in the top two blocks: anvil drops both; txmanager sends its own
	// again, and the outsider its deposit.
	for attempt, caught := 1, false; !caught; attempt++ {
		if attempt > 5 {
			t.Fatalf("in 5 attempts, no depth-2 reorg caught a deposit and a txfence transaction in the top two blocks")
		}
		req := txRequest{name: fmt.Sprintf("transaction under the reorg (attempt %d)", attempt), from: reorged, to: outsider, value: "1000", route: "public"}
		one := gw.sendAll(req)
		hash := gw.waitHash(one[req.name])
		deposit := chain.sign(outsiderKey, &payer, ether(4), nil, params.TxGas)
		chain.send(deposit)
		caught = chain.reorgOver(hash, deposit.Hash())
		deposits = append(deposits, chain.mined(deposit)) // sent again when the reorg dropped it
		maps.Copy(sent, one)
	}

	// A reorg deeper than txmanager's confirmations, once the ledger has
	// booked a txfence transaction and a deposit in the blocks it takes
	// out: the ledger reverses both; txmanager sends its own again and the
	// ledger books it from its new block, as the scanner books the
	// deposit, sent again.
	books.waitOpened(reorged)
	lastOutside := uint64(0)
	for _, r := range append(deposits, deploy) {
		lastOutside = max(lastOutside, r.BlockNumber.Uint64())
	}
	for attempt, caught := 1, false; !caught; attempt++ {
		if attempt > 5 {
			t.Fatalf("in 5 attempts, no reorg took out a booked transaction and a booked deposit")
		}
		// Nothing else of the outsider's may share the blocks taken out:
		// it would not be sent again.
		poll(t, 20*time.Millisecond, func() bool { return chain.head() > lastOutside }, func() string { return "no block after the outsider's" })
		req := txRequest{name: fmt.Sprintf("transaction under the deep reorg (attempt %d)", attempt), from: reorged, to: outsider, value: "2000", route: "public"}
		one := gw.sendAll(req)
		depositTx := chain.sign(outsiderKey, &payer, ether(5), nil, params.TxGas)
		deposit := chain.mined(depositTx)
		confirmed := gw.waitFinal(chain, one)[req.name]
		books.waitJournal(req.name, "confirmed", confirmed)
		books.waitJournal("the deposit under the deep reorg", "deposit", deposit)
		maps.Copy(sent, one)
		if caught = chain.reorgBelow(confirmed, deposit); caught {
			books.waitReversed(req.name, confirmed)
			books.waitReversed("the deposit under the deep reorg", deposit)
		}
		deposit = chain.mined(depositTx) // sent again when the reorg dropped it
		deposits = append(deposits, deposit)
		lastOutside = deposit.BlockNumber.Uint64()
	}
	maps.Copy(final, gw.waitFinal(chain, sent))

	// The ledger booked each of txfence's transactions from its final
	// block, and each deposit from its own.
	for name, r := range final {
		kind := "confirmed"
		if r.Status == types.ReceiptStatusFailed {
			kind = "reverted"
		}
		books.waitJournal(name, kind, r)
	}
	for i, r := range deposits {
		books.waitJournal(fmt.Sprintf("deposit %d", i+1), "deposit", r)
	}

	// Every wallet and asset ties out once the chain has moved past every
	// settlement by the reconciliation depth.
	last := uint64(0)
	for _, r := range append(slices.Collect(maps.Values(final)), deposits...) {
		last = max(last, r.BlockNumber.Uint64())
	}
	run := books.reconcile(chain, last)
	if run.Status != "complete" || run.Differences != 0 || run.Deferred != 0 {
		t.Errorf("reconciliation at block %d: %s (%s), %d differences, %d deferred; want complete, none",
			run.BlockNumber, run.Status, run.Problem, run.Differences, run.Deferred)
	}
	tokenAsset := strings.ToLower(tok.Hex())
	byHolding := run.byHolding()
	for _, w := range []common.Address{devAccount(0), devAccount(1), payer, holder, reverter, reorged} {
		if _, ok := byHolding[holdingKey(w, "native")]; !ok {
			t.Errorf("reconciliation at block %d has no native item of wallet %s", run.BlockNumber, w)
		}
	}
	if it, ok := byHolding[holdingKey(holder, tokenAsset)]; !ok || it.ChainBalance == nil || *it.ChainBalance != "600" {
		t.Errorf("reconciliation at block %d: wallet %s's token item %+v, want a chain balance of 600", run.BlockNumber, holder, it)
	}
	for _, it := range run.Items {
		if it.Difference == nil || *it.Difference != "0" {
			t.Errorf("reconciliation at block %d: %s", run.BlockNumber, it)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Value no transaction moved: the next run finds it, and only it.
	moved := books.walletWithoutSuspense(payer, holder, reverter, reorged)
	balance := chain.balance(moved)
	chain.call(nil, "anvil_setBalance", moved, (*hexutil.Big)(new(big.Int).Add(balance, big.NewInt(unbookedWei))))
	setAt := chain.head()
	run = books.reconcile(chain, setAt+1)
	for _, it := range run.Items {
		if it.holding() != holdingKey(moved, "native") {
			if it.Difference == nil || *it.Difference != "0" {
				t.Errorf("reconciliation at block %d: %s; want a difference of 0", run.BlockNumber, it)
			}
			continue
		}
		if it.Difference == nil || *it.Difference != strconv.Itoa(unbookedWei) || it.JournalID == nil ||
			!strings.Contains(it.Cause, "inbound movement") {
			t.Errorf("reconciliation at block %d: %s; want a difference of %d booked by a journal, as an inbound movement",
				run.BlockNumber, it, unbookedWei)
		}
	}
	if _, ok := run.byHolding()[holdingKey(moved, "native")]; !ok {
		t.Errorf("reconciliation at block %d has no native item of wallet %s", run.BlockNumber, moved)
	}
	if run.Differences != 1 || run.Status != "complete" {
		t.Errorf("reconciliation at block %d: %s (%s), %d differences; want complete, 1", run.BlockNumber, run.Status, run.Problem, run.Differences)
	}
	if got := books.suspense(moved); len(got) != 1 || got[0].Asset != "native" || got[0].Balance != "-"+strconv.Itoa(unbookedWei) {
		t.Errorf("wallet %s's suspense accounts: %+v; want native, -%d", moved, got, unbookedWei)
	}

	// The operator explains it through the gateway's operator path: an
	// adjustment moves it from suspense to the account it came from. No
	// threshold is set, so it waits for a second admin key (made before
	// the proposal), whose approval books it; then suspense is clear.
	code, b := gw.do("POST", "/api/v1/keys", `{"name": "e2e-approver", "scopes": ["admin"]}`)
	if code != http.StatusCreated {
		t.Fatalf("the approver's key: %d %s", code, b)
	}
	var approverKey struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &approverKey); err != nil {
		t.Fatal(err)
	}
	approver := gatewayAPI{t: t, url: gw.url, key: approverKey.Token}
	id := "e2e-" + strings.ToLower(moved.Hex())[2:14]
	body := fmt.Sprintf(`{"adjustment_id": %q, "chain_id": 31337, "wallet": %q, "asset": "native", "amount": "%d",
		"counter_account": {"kind": "opening_balance", "address": %q}, "reason": "anvil_setBalance by the stack test"}`,
		id, moved.Hex(), unbookedWei, moved.Hex())
	if code, b := gw.do("POST", "/api/v1/ledger/adjustments", body); code != http.StatusAccepted {
		t.Errorf("the adjustment's proposal: %d %s, want it to wait for a second key", code, b)
	}
	if code, b := approver.do("POST", "/api/v1/ledger/adjustments/"+id+"/approve", ""); code != http.StatusOK || !strings.Contains(string(b), `"status":"booked"`) {
		t.Errorf("the adjustment's approval: %d %s", code, b)
	}
	// ledgerd itself books no adjustment that does not come through the
	// gateway's operator path.
	resp, err := books.client.Post(books.url+"/v1/adjustments", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a bare adjustment to ledgerd: %d, want 403", resp.StatusCode)
	}
	if got := books.suspense(moved); len(got) != 1 || got[0].Balance != "0" {
		t.Errorf("wallet %s's suspense accounts after the adjustment: %+v; want native, 0", moved, got)
	}
}

// devAccount is anvil's i-th development account (its default mnemonic).
func devAccount(i int) common.Address {
	return []common.Address{
		common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
		common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
		common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"),
		common.HexToAddress("0x90F79bf6EB2c4f870365E785982E1f101E93b906"),
		common.HexToAddress("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"),
		common.HexToAddress("0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"),
	}[i]
}

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(params.Ether)) }

// waitTimeout bounds each wait of requireReconciled: the stack settles in
// seconds, the margin is for a loaded two-core machine.
const waitTimeout = 2 * time.Minute

// poll calls done every tick until it reports true, failing the test
// with what() once waitTimeout has passed.
func poll(t *testing.T, tick time.Duration, done func() bool, what func() string) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for !done() {
		select {
		case <-deadline.C:
			t.Fatalf("after %s: %s", waitTimeout, what())
		case <-ticker.C:
		}
	}
}

// stackChain is the stack's anvil, reached by its URL as an outside
// account would reach a chain.
type stackChain struct {
	t       *testing.T
	rpc     *rpc.Client
	eth     *ethclient.Client
	chainID *big.Int
}

// dialStackChain connects to the stack's first chain's anvil (the one
// with the development relay), named first in the chains file devstack
// wrote for txmanagerd, which lists its two chains.
func dialStackChain(t *testing.T, stateDir string) *stackChain {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(stateDir, "chains.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Chains []struct {
			ChainID uint64   `json:"chain_id"`
			RPC     []string `json:"rpc"`
		} `json:"chains"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Chains) != 2 || len(doc.Chains[0].RPC) != 2 || len(doc.Chains[1].RPC) == 0 {
		t.Fatalf("the chains file: %v\n%s", err, raw)
	}
	client, err := rpc.Dial(doc.Chains[0].RPC[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &stackChain{t: t, rpc: client, eth: ethclient.NewClient(client), chainID: new(big.Int).SetUint64(doc.Chains[0].ChainID)}
}

// call makes one RPC call, failing the test on an error.
func (c *stackChain) call(result any, method string, args ...any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.rpc.CallContext(ctx, result, method, args...); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *stackChain) head() uint64 {
	c.t.Helper()
	var n hexutil.Uint64
	c.call(&n, "eth_blockNumber")
	return uint64(n)
}

func (c *stackChain) balance(a common.Address) *big.Int {
	c.t.Helper()
	var b hexutil.Big
	c.call(&b, "eth_getBalance", a, "latest")
	return b.ToInt()
}

// sign signs an EIP-1559 transaction from key at its pending nonce, to
// nil for a contract creation, with room for the base fee to double.
func (c *stackChain) sign(key *ecdsa.PrivateKey, to *common.Address, value *big.Int, data []byte, gas uint64) *types.Transaction {
	c.t.Helper()
	var nonce hexutil.Uint64
	c.call(&nonce, "eth_getTransactionCount", crypto.PubkeyToAddress(key.PublicKey), "pending")
	var tip hexutil.Big
	c.call(&tip, "eth_maxPriorityFeePerGas")
	var head struct {
		BaseFee *hexutil.Big `json:"baseFeePerGas"`
	}
	c.call(&head, "eth_getBlockByNumber", "latest", false)
	if value == nil {
		value = new(big.Int)
	}
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(c.chainID), &types.DynamicFeeTx{
		ChainID: c.chainID, Nonce: uint64(nonce), GasTipCap: tip.ToInt(),
		GasFeeCap: new(big.Int).Add(tip.ToInt(), new(big.Int).Mul(head.BaseFee.ToInt(), big.NewInt(2))),
		Gas:       gas, To: to, Value: value, Data: data,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return tx
}

func (c *stackChain) send(tx *types.Transaction) {
	c.t.Helper()
	raw, err := tx.MarshalBinary()
	if err != nil {
		c.t.Fatal(err)
	}
	c.call(nil, "eth_sendRawTransaction", hexutil.Bytes(raw))
}

// stackBlock is a block as the chain names it.
type stackBlock struct {
	Number hexutil.Uint64 `json:"number"`
	Hash   common.Hash    `json:"hash"`
}

// block is the canonical block at number; nil when the chain has none.
func (c *stackChain) block(number uint64) *stackBlock {
	c.t.Helper()
	var b *stackBlock
	c.call(&b, "eth_getBlockByNumber", hexutil.Uint64(number), false)
	return b
}

// receipt is hash's receipt on the canonical chain, if it has one.
func (c *stackChain) receipt(hash common.Hash) (*types.Receipt, bool) {
	c.t.Helper()
	var r *types.Receipt
	c.call(&r, "eth_getTransactionReceipt", hash)
	return r, r != nil
}

// mined sends tx when the node lacks it, waits for its receipt and fails
// the test unless it succeeded.
func (c *stackChain) mined(tx *types.Transaction) *types.Receipt {
	c.t.Helper()
	var known *json.RawMessage
	c.call(&known, "eth_getTransactionByHash", tx.Hash())
	if known == nil || string(*known) == "null" {
		c.send(tx)
	}
	var r *types.Receipt
	poll(c.t, 20*time.Millisecond, func() bool {
		var ok bool
		r, ok = c.receipt(tx.Hash())
		return ok
	}, func() string { return fmt.Sprintf("transaction %s is not mined", tx.Hash()) })
	if r.Status != types.ReceiptStatusSuccessful {
		c.t.Fatalf("transaction %s reverted in block %d", tx.Hash(), r.BlockNumber)
	}
	return r
}

// reorgOver waits for every one of hashes to be mined and, if they all
// are in the top two blocks, replaces those (anvil_reorg, depth 2). It
// reports whether the reorg took every one of them out of the chain.
func (c *stackChain) reorgOver(hashes ...common.Hash) bool {
	c.t.Helper()
	lowest := uint64(0)
	poll(c.t, 5*time.Millisecond, func() bool {
		lowest = ^uint64(0)
		for _, h := range hashes {
			r, ok := c.receipt(h)
			if !ok {
				return false
			}
			lowest = min(lowest, r.BlockNumber.Uint64())
		}
		return true
	}, func() string { return fmt.Sprintf("transactions %v are not all mined", hashes) })
	head := c.head()
	if head > lowest+1 {
		c.t.Logf("block %d is deeper than 2 already: the reorg would miss it", lowest)
		return false
	}
	// A JSON number: anvil refuses a hex quantity here.
	c.call(nil, "anvil_reorg", 2, []any{})
	for _, h := range hashes {
		if _, ok := c.receipt(h); ok {
			c.t.Logf("a block was built before the reorg: %s stayed on the chain", h)
			return false
		}
	}
	c.t.Logf("a reorg of depth 2 at block %d took out %v", head, hashes)
	return true
}

// reorgBelow replaces every block from the lowest of receipts' up to the
// head (anvil_reorg at that depth) and reports whether that took each of
// them out of its block: one built between reading the head and the
// reorg leaves the lowest in place.
func (c *stackChain) reorgBelow(receipts ...*types.Receipt) bool {
	c.t.Helper()
	lowest := ^uint64(0)
	for _, r := range receipts {
		lowest = min(lowest, r.BlockNumber.Uint64())
	}
	head := c.head()
	c.call(nil, "anvil_reorg", head-lowest+1, []any{})
	for _, r := range receipts {
		if now, ok := c.receipt(r.TxHash); ok && now.BlockHash == r.BlockHash {
			c.t.Logf("a block was built before the reorg: %s stayed in block %d", r.TxHash, r.BlockNumber)
			return false
		}
	}
	c.t.Logf("a reorg of depth %d at block %d took out blocks %d and up", head-lowest+1, head, lowest)
	return true
}

// gatewayAPI is the stack's front door, with the admin key.
type gatewayAPI struct {
	t        *testing.T
	url, key string
}

func (g gatewayAPI) do(method, path, body string, headers ...string) (int, []byte) {
	g.t.Helper()
	resp, b := servicetest.Do(g.t, http.DefaultClient, method, g.url+path, body, append([]string{"Authorization", "Bearer " + g.key}, headers...)...)
	return resp.StatusCode, b
}

// txRequest is a transaction to send through the gateway; name says what
// it is in failures.
type txRequest struct {
	name     string
	from, to common.Address
	value    string
	data     string
	gas      int64
	route    string
	// reverts: it ends REVERTED, not CONFIRMED.
	reverts bool
}

// sentTx is a transaction the gateway accepted.
type sentTx struct {
	txRequest
	id string
}

// sendAll creates reqs through the gateway, by name.
func (g gatewayAPI) sendAll(reqs ...txRequest) map[string]sentTx {
	g.t.Helper()
	out := map[string]sentTx{}
	for _, r := range reqs {
		body := map[string]any{"chain_id": 31337, "from": r.from.Hex(), "to": r.to.Hex(), "route": r.route}
		if r.value != "" {
			body["value"] = r.value
		}
		if r.data != "" {
			body["data"] = r.data
		}
		if r.gas != 0 {
			body["gas"] = r.gas
		}
		raw, err := json.Marshal(body)
		if err != nil {
			g.t.Fatal(err)
		}
		code, b := g.do("POST", "/api/v1/tx", string(raw), "Idempotency-Key", fmt.Sprintf("ledger-e2e-%d", time.Now().UnixNano()))
		var tx struct {
			TxID string `json:"tx_id"`
		}
		if err := json.Unmarshal(b, &tx); err != nil || code != http.StatusCreated {
			g.t.Fatalf("create the %s: %d %s", r.name, code, b)
		}
		out[r.name] = sentTx{txRequest: r, id: tx.TxID}
	}
	return out
}

// gatewayTx is what the gateway says of a transaction.
type gatewayTx struct {
	State, SubState, Reason string
	Hash                    common.Hash
}

func (g gatewayAPI) tx(s sentTx) gatewayTx {
	g.t.Helper()
	code, b := g.do("GET", "/api/v1/tx/"+s.id, "")
	var tx struct {
		State    string      `json:"state"`
		SubState string      `json:"sub_state"`
		Reason   string      `json:"reason"`
		Hash     common.Hash `json:"hash"`
	}
	if err := json.Unmarshal(b, &tx); err != nil || code != http.StatusOK {
		g.t.Fatalf("get the %s: %d %s", s.name, code, b)
	}
	if tx.State == "FAILED" || tx.State == "CANCELLED" {
		g.t.Fatalf("the %s: %s", s.name, b)
	}
	return gatewayTx{State: tx.State, SubState: tx.SubState, Reason: tx.Reason, Hash: tx.Hash}
}

// waitHash waits until s is signed and returns its hash.
func (g gatewayAPI) waitHash(s sentTx) common.Hash {
	g.t.Helper()
	var tx gatewayTx
	poll(g.t, 5*time.Millisecond, func() bool {
		tx = g.tx(s)
		return tx.Hash != (common.Hash{})
	}, func() string { return fmt.Sprintf("the %s has no hash: %+v", s.name, tx) })
	return tx.Hash
}

// waitFinal waits until every one of sent is final in the gateway
// (CONFIRMED, or REVERTED for one meant to revert) with its receipt on the
// canonical chain, which a reorg may have changed since, and returns the
// receipts by name.
func (g gatewayAPI) waitFinal(chain *stackChain, sent map[string]sentTx) map[string]*types.Receipt {
	g.t.Helper()
	out := map[string]*types.Receipt{}
	for name, s := range sent {
		want, status := "CONFIRMED", types.ReceiptStatusSuccessful
		if s.reverts {
			want, status = "REVERTED", types.ReceiptStatusFailed
		}
		var tx gatewayTx
		poll(g.t, 50*time.Millisecond, func() bool {
			tx = g.tx(s)
			if tx.State != want {
				if tx.State == "CONFIRMED" || tx.State == "REVERTED" {
					g.t.Fatalf("the %s ended %s, want %s", name, tx.State, want)
				}
				return false
			}
			r, ok := chain.receipt(tx.Hash)
			if !ok {
				return false // a reorg took it out; txmanager has not seen it yet
			}
			if r.Status != status {
				g.t.Fatalf("the %s is %s, but its receipt's status is %d", name, tx.State, r.Status)
			}
			out[name] = r
			return true
		}, func() string { return fmt.Sprintf("the %s is not %s on the chain: %+v", name, want, tx) })
	}
	return out
}

// ledgerAPI is ledgerd's internal API, called as the gateway.
type ledgerAPI struct {
	t      *testing.T
	url    string
	client *http.Client
}

func (l ledgerAPI) get(path string, v any) {
	l.t.Helper()
	resp, err := l.client.Get(l.url + path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		l.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		l.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

type ledgerAccount struct {
	Asset   string `json:"asset"`
	Kind    string `json:"kind"`
	Balance string `json:"balance"`
}

func (l ledgerAPI) accounts(query string) []ledgerAccount {
	l.t.Helper()
	var page struct {
		Accounts   []ledgerAccount `json:"accounts"`
		NextCursor *string         `json:"next_cursor"`
	}
	l.get("/v1/accounts?chain_id=31337&limit=1000&"+query, &page)
	if page.NextCursor != nil {
		l.t.Fatalf("more than 1000 accounts for %s", query)
	}
	return page.Accounts
}

// waitOpened waits until the scanner has opened each wallet: its opening
// books its native balance (anvil's accounts hold ether) to its wallet
// account.
func (l ledgerAPI) waitOpened(wallets ...common.Address) {
	l.t.Helper()
	for _, w := range wallets {
		poll(l.t, 100*time.Millisecond, func() bool {
			return len(l.accounts("kind=wallet&asset=native&address="+w.Hex())) == 1
		}, func() string { return fmt.Sprintf("wallet %s is not opened", w) })
	}
}

func (l ledgerAPI) suspense(w common.Address) []ledgerAccount {
	l.t.Helper()
	return l.accounts("kind=suspense&address=" + w.Hex())
}

// walletWithoutSuspense is the first of wallets with no suspense account:
// the stack's state outlives a run, and so do the books.
func (l ledgerAPI) walletWithoutSuspense(wallets ...common.Address) common.Address {
	l.t.Helper()
	for _, w := range wallets {
		if len(l.suspense(w)) == 0 {
			return w
		}
	}
	l.t.Fatalf("every one of %v has a suspense account already: start from an empty state directory", wallets)
	return common.Address{}
}

// bookedJournal is a journal of a transaction, as ledgerd lists it.
type bookedJournal struct {
	ID         int64       `json:"journal_id"`
	Kind       string      `json:"kind"`
	BlockHash  common.Hash `json:"block_hash"`
	Reverses   *int64      `json:"reverses"`
	ReversedBy *int64      `json:"reversed_by"`
}

// waitJournals waits until the journals of r's transaction satisfy done,
// failing the test with want and the journals once waitTimeout passes.
func (l ledgerAPI) waitJournals(r *types.Receipt, want string, done func([]bookedJournal) bool) {
	l.t.Helper()
	var got []bookedJournal
	poll(l.t, 100*time.Millisecond, func() bool {
		var page struct {
			Journals []bookedJournal `json:"journals"`
		}
		l.get(fmt.Sprintf("/v1/journals?chain_id=31337&limit=1000&tx_hash=%s", r.TxHash.Hex()), &page)
		got = page.Journals
		return done(got)
	}, func() string {
		return fmt.Sprintf("%s (%s, block %d %s); its journals: %+v", want, r.TxHash, r.BlockNumber, r.BlockHash, got)
	})
}

// waitJournal waits until the ledger has booked r's transaction as a
// journal of kind in r's block, not reversed.
func (l ledgerAPI) waitJournal(name, kind string, r *types.Receipt) {
	l.t.Helper()
	l.waitJournals(r, fmt.Sprintf("the ledger has not booked the %s as %s", name, kind), func(js []bookedJournal) bool {
		return slices.ContainsFunc(js, func(j bookedJournal) bool {
			return j.Kind == kind && j.BlockHash == r.BlockHash && j.ReversedBy == nil
		})
	})
}

// waitReversed waits until the ledger has reversed what it booked of r's
// transaction in r's block: a reversal journal linked to the booking.
func (l ledgerAPI) waitReversed(name string, r *types.Receipt) {
	l.t.Helper()
	l.waitJournals(r, fmt.Sprintf("the ledger has not reversed the %s", name), func(js []bookedJournal) bool {
		return slices.ContainsFunc(js, func(j bookedJournal) bool {
			return j.BlockHash == r.BlockHash && j.Kind != "reversal" && j.ReversedBy != nil &&
				slices.ContainsFunc(js, func(rev bookedJournal) bool {
					return rev.ID == *j.ReversedBy && rev.Kind == "reversal" && rev.Reverses != nil && *rev.Reverses == j.ID
				})
		})
	})
}

// reconciliationRun is a run's report, as ledgerd answers it.
type reconciliationRun struct {
	RunID       int64                `json:"run_id"`
	BlockNumber uint64               `json:"block_number"`
	Status      string               `json:"status"`
	Problem     string               `json:"problem"`
	Differences int                  `json:"differences"`
	Deferred    int                  `json:"deferred"`
	Items       []reconciliationItem `json:"items"`
}

type reconciliationItem struct {
	Address       string  `json:"address"`
	Asset         string  `json:"asset"`
	LedgerBalance string  `json:"ledger_balance"`
	ChainBalance  *string `json:"chain_balance"`
	Difference    *string `json:"difference"`
	Cause         string  `json:"cause"`
	JournalID     *int64  `json:"journal_id"`
}

func (it reconciliationItem) String() string {
	deref := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	journal := "none"
	if it.JournalID != nil {
		journal = strconv.FormatInt(*it.JournalID, 10)
	}
	return fmt.Sprintf("%s %s: ledger %s, chain %s, difference %s, journal %s, cause %q",
		it.Address, it.Asset, it.LedgerBalance, deref(it.ChainBalance), deref(it.Difference), journal, it.Cause)
}

func holdingKey(w common.Address, asset string) string { return strings.ToLower(w.Hex()) + " " + asset }

func (it reconciliationItem) holding() string { return strings.ToLower(it.Address) + " " + it.Asset }

func (r reconciliationRun) byHolding() map[string]reconciliationItem {
	out := map[string]reconciliationItem{}
	for _, it := range r.Items {
		out[it.holding()] = it
	}
	return out
}

// reconcileDepth is devstack's TXFENCE_LEDGER_RECONCILE_DEPTH.
const reconcileDepth = 6

// reconcile asks for a reconciliation once the block it pins (the head
// less the depth) is at least from, and again while the ledger refuses
// it as not complete up to that block (503), and returns the run.
func (l ledgerAPI) reconcile(chain *stackChain, from uint64) reconciliationRun {
	l.t.Helper()
	poll(l.t, 50*time.Millisecond, func() bool { return chain.head() >= from+reconcileDepth },
		func() string { return fmt.Sprintf("the chain has not reached block %d", from+reconcileDepth) })
	var run reconciliationRun
	var last string
	started, refused := time.Now(), 0
	poll(l.t, 100*time.Millisecond, func() bool {
		resp, err := l.client.Post(l.url+"/v1/reconciliations", "application/json", strings.NewReader(`{"chain_id": 31337}`))
		if err != nil {
			l.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			refused++
			return false
		case http.StatusCreated:
		default:
			l.t.Fatalf("POST /v1/reconciliations: %s", last)
		}
		if err := json.Unmarshal(b, &run); err != nil {
			l.t.Fatalf("POST /v1/reconciliations: %v: %s", err, b)
		}
		return true
	}, func() string {
		return fmt.Sprintf("the ledger still refuses to reconcile, %d times over: %s", refused, last)
	})
	l.t.Logf("reconciliation run %d at block %d: %d items, %d differences, after %d refusals in %s",
		run.RunID, run.BlockNumber, len(run.Items), run.Differences, refused, time.Since(started).Round(time.Millisecond))
	if run.BlockNumber < from {
		l.t.Fatalf("reconciliation run %d pinned block %d, below %d", run.RunID, run.BlockNumber, from)
	}
	return run
}
