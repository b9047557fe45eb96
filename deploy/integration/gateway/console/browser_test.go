package console_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/console"
	"github.com/txfence/txfence/ledger"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// chromiumPath is Debian's Chromium, which the browser test drives
// (TXFENCE_CHROMIUM names another binary). Where it is missing the test
// skips, except under CI or make test (TXFENCE_TEST_STRICT=1), where it
// fails naming the package to install.
func chromiumPath(t *testing.T) string {
	t.Helper()
	exe := "/usr/bin/chromium"
	if p := os.Getenv("TXFENCE_CHROMIUM"); p != "" {
		exe = p
	}
	if _, err := os.Stat(exe); err != nil {
		pgtest.Unavailable(t, "Chromium for the console's browser test (install Debian's package: apt-get install chromium, or run deploy/scripts/setup.sh)", err)
	}
	return exe
}

// TestMissingChromium runs TestConsole without a browser: it must fail,
// naming the package, under make test or CI, and skip elsewhere.
func TestMissingChromium(t *testing.T) {
	if os.Getenv("TXFENCE_CHROMIUM") != "" {
		return // this is the run this test starts: it checks TestConsole only
	}
	t.Parallel()
	for _, strict := range []bool{true, false} {
		env := []string{"TXFENCE_CHROMIUM=" + filepath.Join(t.TempDir(), "no-chromium")}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "TXFENCE_TEST_STRICT=") {
				env = append(env, kv)
			}
		}
		if strict {
			env = append(env, "TXFENCE_TEST_STRICT=1")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestConsole$", "-test.v")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		switch {
		case strict && (err == nil || !strings.Contains(string(out), "apt-get install chromium") || !strings.Contains(string(out), "--- FAIL: TestConsole")):
			t.Errorf("strict run without Chromium: %v, want a failure naming apt-get install chromium:\n%s", err, out)
		case !strict && (err != nil || !strings.Contains(string(out), "--- SKIP: TestConsole")):
			t.Errorf("run without Chromium: %v, want a skip:\n%s", err, out)
		}
	}
}

// stepTimeout bounds each wait in the browser: a missing element fails the
// test with the step's name instead of hanging until the test's deadline.
const stepTimeout = 20 * time.Second

// browser is one headless Chromium tab, watched for page errors.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions, console errors, CSP violations
}

func startBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	// The flags a headless Chromium needs on these machines (go-svc.md):
	// no sandbox as root, no GPU, and no background connections, which
	// the closed network refuses. A fresh profile for every run.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	// Registered after t.TempDir: the browser has exited before its
	// profile directory is removed.
	t.Cleanup(func() {
		bcancel()
		acancel()
		cancel()
	})
	b := &browser{t: t, ctx: bctx}
	if err := chromedp.Listen(bctx, b.watch); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	b.do("set the viewport to 1280x800", chromedp.EmulateViewport(1280, 800))
	return b
}

// watch records what the page reports as wrong. Network errors (the 401,
// 403 and 404 answers the test asks for) are the page's to show, not
// problems.
func (b *browser) watch(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "exception: " + d.Text
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Source != log.EntrySourceNetwork && (e.Level == log.EntryLevelError || e.Source == log.EntrySourceSecurity) {
			p = fmt.Sprintf("log %s/%s: %s (%s)", e.Source, e.Level, e.Text, e.URL)
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v%s", step, err, b.context())
	}
}

// context is what the page shows, to explain a failed step.
func (b *browser) context() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return ""
	}
	return "\n--- the page shows ---\n" + text
}

// wait waits until an element matching css is visible.
func (b *browser) wait(css string) {
	b.t.Helper()
	b.do("wait for "+css, chromedp.WaitVisible(chromedp.CSS(css)))
}

// fact is the text of the value of term in the <dl> css names, "" if the
// list has no such term.
func (b *browser) fact(css, term string) string {
	b.t.Helper()
	q, _ := json.Marshal(css + " > dt")
	tq, _ := json.Marshal(term)
	return eval[string](b, fmt.Sprintf(`(() => { const dt = Array.from(document.querySelectorAll(%s)).find((e) => e.textContent === %s);
		return dt ? dt.nextElementSibling.innerText : "" })()`, q, tq))
}

// click waits for the element and clicks it.
func (b *browser) click(css string) {
	b.t.Helper()
	b.do("click "+css, chromedp.Click(chromedp.CSS(css)))
}

// follow waits for the link css names and follows it with a DOM click on
// the element there at that moment: a list the page re-renders as it
// refreshes (the attention list) can move a row between chromedp's
// finding it and its mouse click at the row's coordinates, which then
// lands on another row or none.
func (b *browser) follow(css string) {
	b.t.Helper()
	b.wait(css)
	q, _ := json.Marshal(css)
	if !eval[bool](b, fmt.Sprintf(`(() => { const a = document.querySelector(%s); if (!a) return false; a.click(); return true })()`, q)) {
		b.t.Fatalf("follow %s: gone before it was clicked%s", css, b.context())
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the visible text of the first element matching css ("" if none).
func (b *browser) text(css string) string {
	b.t.Helper()
	q, _ := json.Marshal(css)
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText`, q))
}

// waitText waits until the element's text contains want. The console's
// DOM changes when API answers arrive; this polls the page with a deadline
// rather than sleeping.
func (b *browser) waitText(css, want string) string {
	b.t.Helper()
	b.wait(css)
	deadline := time.Now().Add(stepTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		got := b.text(css)
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s shows %q, want it to contain %q%s", css, got, want, b.context())
		}
		<-tick.C
	}
}

// confirm answers the console's confirmation dialog with its action
// button, after checking it describes the action, and returns what the
// dialog said.
func (b *browser) confirm(want string) string {
	b.t.Helper()
	said := b.waitText("#confirm[open]", want)
	b.click("#confirm[open] #confirm-yes")
	b.do("wait for the dialog to close", chromedp.WaitNotPresent(chromedp.CSS("#confirm[open]")))
	return said
}

func (b *browser) signIn(key string) {
	b.t.Helper()
	b.do("sign in", chromedp.SetValue(chromedp.CSS("#signin-key"), key), chromedp.Click(chromedp.CSS("#signin-submit")))
}

func (b *browser) signOut() {
	b.t.Helper()
	b.click("#signout")
	b.wait("#signin-key")
}

// screenshot writes a full-page PNG under the test's temporary directory
// and a copy at a stable path, printed in the test log, and checks that
// it is a real picture of the page.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(strings.NewReader(string(buf)))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	size := img.Bounds().Size()
	if size.X < 1024 || size.X > 4096 || size.Y < 600 || size.Y > 20000 {
		b.t.Errorf("screenshot %s is %dx%d, not a page at 1280x800", name, size.X, size.Y)
	}
	if n := colours(img); n < 16 {
		b.t.Errorf("screenshot %s has %d colours: an empty page?", name, n)
	}
	tmp := filepath.Join(b.t.TempDir(), name+".png")
	stable := filepath.Join(os.TempDir(), "txfence-console-test", name+".png")
	for _, p := range []string{tmp, stable} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.t.Logf("screenshot %s (%dx%d, %d bytes): %s (copy of %s)", name, size.X, size.Y, len(buf), stable, tmp)
}

// colours counts the distinct colours of img, up to 1000.
func colours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			seen[[4]uint32{cr, cg, cb, ca}] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// approverKeyFile is the key file `signerctl approver new` writes
// (signer-zonec/signerctl/approve.go, approverKeyFile), for txctl approve.
func approverKeyFile(t *testing.T, id string, seed []byte, pub ed25519.PublicKey) []byte {
	t.Helper()
	b, err := json.MarshalIndent(map[string]string{
		"kind": "txfence-approver-key-v1", "id": id,
		"seed": base64.StdEncoding.EncodeToString(seed), "public_key": base64.StdEncoding.EncodeToString(pub),
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// approverPolicy is a signerd policy file that holds every transaction of
// signer A for one approval of approver id: the policy txmanager checks
// approvals with before it keeps them.
func approverPolicy(t *testing.T, id string, pub ed25519.PublicKey) string {
	t.Helper()
	return signertest.ApprovalPolicy{RuleID: "large-withdrawals", From: gatewaystack.SignerA, MaxGas: 30_000_000, MaxTTL: "24h",
		Approvers: map[string]ed25519.PublicKey{id: pub}}.Write(t)
}

// anvilKey is anvil's first well-known development key, SignerA's.
const anvilKey = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// broadcastStuck takes tx through simulation, a nonce, a real signature
// and a broadcast to BROADCASTED with sub-state stuck, as the owner node
// would, under fence.
func broadcastStuck(t *testing.T, st *postgres.Store, f txmanager.Fence, id uuid.UUID, nonce uint64) common.Hash {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Simulated(ctx, f, id, 21000); err != nil {
		t.Fatal(err)
	}
	maxFee, tip := big.NewInt(30_000_000_000), big.NewInt(1_500_000_000)
	if _, err := st.Allocate(ctx, f, []uuid.UUID{id}, []txmanager.Fees{{MaxFeePerGas: maxFee, MaxPriorityFeePerGas: tip}}, nonce); err != nil {
		t.Fatal(err)
	}
	key, err := crypto.HexToECDSA(anvilKey)
	if err != nil {
		t.Fatal(err)
	}
	bob := common.HexToAddress(gatewaystack.Bob)
	signed, err := types.SignNewTx(key, types.LatestSignerForChainID(big.NewInt(31337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(31337), Nonce: nonce, GasTipCap: tip, GasFeeCap: maxFee, Gas: 21000, To: &bob, Value: big.NewInt(1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Signed(ctx, f, []txmanager.Attempt{{TxID: id, Raw: raw, Hash: signed.Hash(), MaxFeePerGas: maxFee, MaxPriorityFeePerGas: tip}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Broadcasted(ctx, f, []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSubState(ctx, f, id, txmanager.StateBroadcasted, txmanager.SubStuck, "stuck"); err != nil {
		t.Fatal(err)
	}
	return signed.Hash()
}

// TestConsole drives the console in a real browser against the real
// public API (and txmanager's and the ledger's real APIs behind it):
// sign-in, the signer's status, pending approvals with what an approval
// covers (a token transfer decoded) and the txctl command that approves,
// run here as shown and verified with the signer's own code, a timeline,
// a cancel, a fee bump, a wallet's balances and statement, the scope and
// tenant boundaries, and sign-out. No page ever offers to load a key.
func TestConsole(t *testing.T) {
	exe := chromiumPath(t)
	t.Parallel()
	// The approver's key, in the file signerctl approver new writes: on
	// the approver's machine, for txctl, never in the browser. The
	// signer's policy lists it, to check approvals with.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "alice.key")
	if err := os.WriteFile(keyPath, approverKeyFile(t, "alice", priv.Seed(), pub), 0o600); err != nil {
		t.Fatal(err)
	}
	g := gatewaystack.Start(t, gatewaystack.Options{Mount: console.Mount, Ledger: true, SignerPolicy: approverPolicy(t, "alice", pub)})
	ctx := context.Background()
	st := g.TxM.Store

	// A lease, so that the signer has an owner, and a nonce cursor.
	signerA := common.HexToAddress(gatewaystack.SignerA)
	key := txmanager.SignerKey{ChainID: 31337, Signer: signerA}
	token, ok, err := st.Acquire(ctx, "node-1", key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	fence := txmanager.Fence{Node: "node-1", Key: key, Token: token}
	chainPending := uint64(7)
	nonce, err := st.NextNonce(ctx, fence, &chainPending)
	if err != nil {
		t.Fatal(err)
	}

	// Three transactions wait for approvals, one is stuck, one is globex's.
	id := func(tx gatewaystack.Tx) uuid.UUID { return uuid.MustParse(tx.TxID) }
	// The one to approve has a max_fee_per_gas of its own, 40 gwei: its
	// fee_ceiling, which the page offers as the approval's.
	resp, body := g.Do(t, g.Acme, "POST", "/api/v1/tx", strings.Replace(gatewaystack.Transfer(gatewaystack.SignerA, "1000"), `"route"`,
		`"max_fee_per_gas": "40000000000", "route"`, 1), "Idempotency-Key", "console-approve")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	toApprove := servicetest.Decode[gatewaystack.Tx](t, body)
	// An ERC-20 transfer of 2.5 tokens (18 decimals) to carol: the page
	// shows it decoded.
	erc20 := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	carol := common.HexToAddress("0x90F79bf6EB2c4f870365E785982E1f101E93b906")
	transfer := append([]byte{0xa9, 0x05, 0x9c, 0xbb}, common.LeftPadBytes(carol.Bytes(), 32)...)
	transfer = append(transfer, common.LeftPadBytes(big.NewInt(25e17).Bytes(), 32)...)
	resp, body = g.Do(t, g.Acme, "POST", "/api/v1/tx", `{"chain_id": 31337, "from": "`+gatewaystack.SignerA+`", "to": "`+erc20.Hex()+
		`", "value": "0", "data": "0x`+common.Bytes2Hex(transfer)+`", "route": "public"}`, "Idempotency-Key", "console-token")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	tokenPay := servicetest.Decode[gatewaystack.Tx](t, body)
	toCancel := g.Create(t, g.Acme, gatewaystack.SignerA, "console-cancel")
	for _, tx := range []gatewaystack.Tx{toApprove, tokenPay, toCancel} {
		if _, err := st.PendingApproval(ctx, fence, id(tx), 21000, time.Now().Add(time.Hour),
			txmanager.StateChanged{Rule: "large-withdrawals", Reason: "approval_required"}); err != nil {
			t.Fatal(err)
		}
	}
	// Its idempotency key, shown as the request id, is markup: the page
	// must show it as text.
	const hostile = `<img/src=x/onerror=alert(1)>`
	stuck := g.Create(t, g.Acme, gatewaystack.SignerA, hostile)
	stuckHash := broadcastStuck(t, st, fence, id(stuck), nonce)
	globexTx := g.Create(t, g.Globex, gatewaystack.SignerB, "globex-1")
	acmeIDs := []string{toApprove.TxID, tokenPay.TxID, toCancel.TxID, stuck.TxID}

	bob := common.HexToAddress(gatewaystack.Bob)
	approveReq := &signer.Request{TxID: toApprove.TxID, ChainID: 31337, From: signerA, Type: signer.DynamicFee, To: &bob, Value: big.NewInt(1000)}

	// The ledger's books of signer A: an opening balance of 5 ETH, a
	// payment of 1.5 ETH and 25 of 0.01 ETH, each with 21000 gwei of gas,
	// so 53 statement entries (more than the view's page of 50), and a
	// token deposit.
	const gas = 21_000 * 1_000_000_000
	opening := g.Ledger.Book(t, ledger.Opening, "opening-a", 1,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, gatewaystack.SignerA, 5e18),
		gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, gatewaystack.SignerA, -5e18))
	g.Ledger.Transfer(t, "payment", gatewaystack.SignerA, gatewaystack.Bob, 15e17, gas, 7)
	for i := range 25 {
		g.Ledger.Transfer(t, fmt.Sprintf("small-%d", i), gatewaystack.SignerA, gatewaystack.Bob, 1e16, gas, uint64(8+i))
	}
	const walletToken = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
	g.Ledger.Book(t, ledger.Deposit, "token-deposit", 40,
		gatewaystack.Leg(ledger.Wallet, walletToken, gatewaystack.SignerA, 5), gatewaystack.Leg(ledger.DepositSource, walletToken, gatewaystack.Bob, -5))
	const walletBalance = "3.249454 ETH" // 5 - 1.5 - 25 × 0.01 - 26 × 0.000021

	b := startBrowser(t, exe)
	// The watcher must see what the page reports, or its silence below
	// would prove nothing.
	eval[bool](b, `console.error("watch probe"), true`)
	b.do("navigate", chromedp.Navigate(g.URL+"/console"))
	b.wait("#signin-key")
	if p := b.takeProblems(); len(p) != 1 || !strings.Contains(p[0], "watch probe") {
		t.Fatalf("the page watcher saw %q, want the probe", p)
	}
	if loc := eval[string](b, `location.pathname`); loc != console.Path {
		t.Errorf("/console led to %s, want %s", loc, console.Path)
	}
	// The policy reached the browser and is enforced: a string assigned to
	// innerHTML throws (Trusted Types), and the browser reports it.
	if got := eval[string](b, `(() => { try { document.createElement("div").innerHTML = "<b>x</b>"; return "allowed" } catch (e) { return e.message } })()`); !strings.Contains(got, "TrustedHTML") {
		t.Errorf("innerHTML with a string: %q, want it refused by the Content-Security-Policy", got)
	}
	if p := b.takeProblems(); len(p) != 1 || !strings.Contains(p[0], "TrustedHTML") {
		t.Errorf("the page watcher saw %q, want the Trusted Types violation", p)
	}

	t.Run("refused key", func(t *testing.T) {
		b.signIn("txf_not-a-key")
		b.waitText(`#signin-error .problem[data-status="401"]`, "sign in again")
		if eval[bool](b, `sessionStorage.length === 0`) != true {
			t.Error("a refused key was kept in sessionStorage")
		}
	})

	b.signIn(g.Acme)
	b.waitText("#who-tenant", "acme")
	b.waitText("#who-key", "admin")

	t.Run("signer status", func(t *testing.T) {
		row := fmt.Sprintf(`#signers tr[data-signer="31337:%s"]`, signerA.Hex())
		b.waitText(row+" td.owner", "node-1")
		if got, want := b.text(row+" td.nonce"), fmt.Sprint(nonce+1); got != want {
			t.Errorf("next nonce shows %q, want %s", got, want)
		}
		if got := b.text(row + " td.token"); got != fmt.Sprint(token) {
			t.Errorf("fencing token shows %q, want %d", got, token)
		}
		b.waitText(row+` .chip[data-state="PENDING_APPROVAL"]`, "3")
		b.waitText(row+` .chip[data-state="BROADCASTED"]`, "1")
		if got := b.text(row + " td.oldest"); got == "" || got == "—" {
			t.Errorf("the oldest open transaction's age shows %q", got)
		}
	})

	t.Run("lists", func(t *testing.T) {
		for _, tx := range []gatewaystack.Tx{toApprove, tokenPay, toCancel} {
			b.wait(fmt.Sprintf(`#approvals tr[data-tx="%s"]`, tx.TxID))
		}
		b.waitText(fmt.Sprintf(`#approvals tr[data-tx="%s"] td.call`, tokenPay.TxID), "ERC-20 transfer")
		b.waitText(fmt.Sprintf(`#approvals tr[data-tx="%s"] td.call`, toApprove.TxID), "value transfer")
		b.waitText(fmt.Sprintf(`#attention tr[data-tx="%s"]`, stuck.TxID), "stuck")
	})

	// noKeyInput fails if the page offers anywhere to load or paste a key.
	noKeyInput := func(t *testing.T) {
		t.Helper()
		if n := eval[int](b, `document.querySelectorAll('input[type=file], textarea, input[type=password]:not(#signin-key)').length`); n != 0 {
			t.Errorf("the page has %d inputs a key could be loaded or pasted into", n)
		}
	}

	t.Run("approve", func(t *testing.T) {
		b.click(fmt.Sprintf(`#approvals tr[data-tx="%s"] a`, toApprove.TxID))
		b.waitText("#tx-id", toApprove.TxID)
		b.waitText(`#timeline li[data-type="tx.state_changed"]:last-child`, "INIT → PENDING_APPROVAL")
		b.waitText("#timeline", "large-withdrawals")

		// What an approval covers, read-only, and the intent hash that
		// the signer computes.
		b.waitText("#approval-intent", "Fee ceiling")
		for term, want := range map[string]string{
			"Chain": "31337", "From": strings.ToLower(gatewaystack.SignerA), "To": strings.ToLower(gatewaystack.Bob), "Type": "eip1559",
			"Value": "1000 wei (0.000000000000001 ETH)", "Call": "none (a plain transfer of value)",
			"Max fee per gas": "40000000000 wei (40 gwei)", "Max priority fee": "not set", "Gas limit": "21000",
			"Fee ceiling": "40000000000 wei per gas (40 gwei)",
		} {
			if got := b.fact("#approval-intent", term); !strings.HasPrefix(got, want) {
				t.Errorf("%s shows %q, want %q", term, got, want)
			}
		}
		if got, want := b.waitText("#approval-intent-hash", "0x"), approveReq.Intent().Hex(); got != want {
			t.Errorf("the page shows intent %s, the signer computes %s", got, want)
		}
		command := b.text("#approve-command")
		if want := "txctl approve " + toApprove.TxID + " --key-file <your key file>"; command != want {
			t.Errorf("the approve command is %q, want %q", command, want)
		}
		if got, want := b.text("#reject-command"), "txctl reject "+toApprove.TxID+" --key-file <your key file>"; got != want {
			t.Errorf("the reject command is %q, want %q", got, want)
		}
		noKeyInput(t)
		b.screenshot("console-approve")

		// The approver runs the command as shown, on their machine: txctl
		// prints the same intent, asks, and signs on yes.
		// txctl is its own module: the test runs its binary, as the
		// approver would, rather than linking it.
		args := strings.Fields(strings.Replace(command, "<your key file>", keyPath, 1))[1:]
		var out, errb strings.Builder
		approve := exec.CommandContext(ctx, servicetest.Build(t, "github.com/txfence/txfence/txctl/cmd/txctl"), args...)
		approve.Env = append(os.Environ(), "TXCTL_URL="+g.URL, "TXCTL_KEY="+g.Acme)
		approve.Stdin, approve.Stdout, approve.Stderr = strings.NewReader("y\n"), &out, &errb
		if err := approve.Run(); err != nil {
			t.Fatalf("txctl %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		if !strings.Contains(errb.String(), "sign this approval? [y/N]") || !strings.Contains(errb.String(), approveReq.Intent().Hex()) {
			t.Errorf("txctl did not show the intent and ask:\n%s", errb.String())
		}
		got, err := st.Approvals(ctx, []uuid.UUID{id(toApprove)})
		if err != nil {
			t.Fatal(err)
		}
		as := got[id(toApprove)]
		if len(as) != 1 || as[0].Approver != "alice" {
			t.Fatalf("stored approvals %+v, want one by alice", as)
		}
		a := signer.Approval{Approver: as[0].Approver, MaxFeePerGas: as[0].MaxFeePerGas, Expiry: as[0].Expiry, Signature: as[0].Signature}
		if a.MaxFeePerGas == nil || a.MaxFeePerGas.Cmp(big.NewInt(40e9)) != 0 {
			t.Errorf("stored fee ceiling %v, want the transaction's 40 gwei", a.MaxFeePerGas)
		}
		if !signer.VerifyApproval(pub, approveReq, a) {
			t.Errorf("the approval's signature does not verify over the signer's approval message (expiry %s)", a.Expiry)
		}
	})

	t.Run("a token transfer, decoded", func(t *testing.T) {
		b.click(`#nav a[data-route="overview"]`)
		b.click(fmt.Sprintf(`#approvals tr[data-tx="%s"] a`, tokenPay.TxID))
		b.waitText("#tx-id", tokenPay.TxID)
		reading := `#approval-intent .reading[data-standard="ERC-20"]`
		if got, want := b.waitText(reading+" .head", "transfer"), "ERC-20 transfer(address,uint256), token contract "+strings.ToLower(erc20.Hex()); got != want {
			t.Errorf("the call shows %q, want %q", got, want)
		}
		call := b.text(reading)
		for _, want := range []string{"recipient", strings.ToLower(carol.Hex()), "amount", "2500000000000000000",
			"moves 2500000000000000000 units of the token to " + strings.ToLower(carol.Hex())} {
			if !strings.Contains(call, want) {
				t.Errorf("the decoded call lacks %q:\n%s", want, call)
			}
		}
		tokenReq := &signer.Request{TxID: tokenPay.TxID, ChainID: 31337, From: signerA, Type: signer.DynamicFee, To: &erc20, Value: new(big.Int), Data: transfer}
		if got, want := b.waitText("#approval-intent-hash", "0x"), tokenReq.Intent().Hex(); got != want {
			t.Errorf("the page shows intent %s, the signer computes %s", got, want)
		}
		for term, want := range map[string]string{
			"To": strings.ToLower(erc20.Hex()), "Value": "0 wei (0 ETH)", "Max fee per gas": "not set", "Max priority fee": "not set",
			// No fee_ceiling: the approver must name one, and the command says so.
			"Fee ceiling": "none: the approver names one with --max-fee",
		} {
			if got := b.fact("#approval-intent", term); !strings.HasPrefix(got, want) {
				t.Errorf("%s shows %q, want %q", term, got, want)
			}
		}
		if got, want := b.text("#approve-command"), "txctl approve "+tokenPay.TxID+" --key-file <your key file> --max-fee <wei per gas>"; got != want {
			t.Errorf("the approve command is %q, want %q", got, want)
		}
		noKeyInput(t)
		b.screenshot("console-approve-token")
	})

	t.Run("cancel before a nonce", func(t *testing.T) {
		b.click(`#nav a[data-route="overview"]`)
		b.click(fmt.Sprintf(`#approvals tr[data-tx="%s"] a`, toCancel.TxID))
		b.waitText("#tx-id", toCancel.TxID)
		b.click("#cancel-tx")
		b.confirm("Cancel the transaction")
		b.wait("#tx-state .badge.s-CANCELLED")
		tx, err := st.Get(ctx, id(toCancel))
		if err != nil || tx.State != txmanager.StateCancelled {
			t.Errorf("cancelled transaction: %+v %v", tx, err)
		}
	})

	t.Run("bump a stuck transaction", func(t *testing.T) {
		b.click(`#nav a[data-route="overview"]`)
		b.follow(fmt.Sprintf(`#attention tr[data-tx="%s"] a`, stuck.TxID))
		b.waitText("#tx-fields", stuckHash.Hex())
		// The client's metadata number is beyond a float's precision: shown exactly.
		b.waitText("#tx-fields", "123456789012345678901234567890")
		b.waitText("#tx-fields", hostile)
		if n := eval[int](b, `document.querySelectorAll("#main img").length`); n != 0 {
			t.Errorf("the request id became %d <img> elements", n)
		}
		b.waitText("#timeline", "SIGNED → BROADCASTED")
		b.click("#action-bump")
		b.confirm("Bump the fees")
		b.waitText(`#tx-oplog tr[data-kind="bump"]`, "pending")
		actions, err := st.Actions(ctx, id(stuck))
		if err != nil || len(actions) != 1 || actions[0].Action != "bump" || !strings.HasPrefix(actions[0].Operator, "key:admin") {
			t.Fatalf("recorded actions %+v %v, want one bump by the admin key", actions, err)
		}
		b.screenshot("console-tx")
	})

	t.Run("a transaction lists each of its parents", func(t *testing.T) {
		resp, body := g.Do(t, g.Acme, "POST", "/api/v1/tx", strings.Replace(gatewaystack.Transfer(gatewaystack.SignerA, "1"), `"route"`,
			`"depends_on": ["`+tokenPay.TxID+`", "`+toApprove.TxID+`"], "route"`, 1), "Idempotency-Key", "console-child")
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		child := servicetest.Decode[gatewaystack.Tx](t, body)
		eval[string](b, `location.hash = "#/tx/`+child.TxID+`"`)
		b.waitText("#tx-id", child.TxID)
		b.wait(`#tx-fields a.txid[data-tx="` + toApprove.TxID + `"]`)
		if got := eval[[]string](b, `[...document.querySelectorAll("#tx-fields a.txid")].map(a => a.dataset.tx)`); !slices.Equal(got, []string{tokenPay.TxID, toApprove.TxID}) {
			t.Errorf("the parents linked: %v, want %s and %s in order", got, tokenPay.TxID, toApprove.TxID)
		}
		b.click(`#tx-fields a.txid[data-tx="` + toApprove.TxID + `"]`)
		b.waitText("#tx-id", toApprove.TxID)
	})

	t.Run("act on transactions stuck before their broadcast", func(t *testing.T) {
		fees := txmanager.Fees{MaxFeePerGas: big.NewInt(30_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_500_000_000)}
		// stuckAt takes a new transfer to state at nonce n, stuck with
		// reason, as the owner node leaves one signerd or every route
		// refused.
		stuckAt := func(requestID string, state txmanager.State, n uint64, reason string) uuid.UUID {
			t.Helper()
			tx := id(g.Create(t, g.Acme, gatewaystack.SignerA, requestID))
			if _, err := st.Simulated(ctx, fence, tx, 21000); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Allocate(ctx, fence, []uuid.UUID{tx}, []txmanager.Fees{fees}, n); err != nil {
				t.Fatal(err)
			}
			if state == txmanager.StateSigned {
				if _, err := st.Signed(ctx, fence, []txmanager.Attempt{{TxID: tx, Raw: tx[:], Hash: common.BytesToHash(append(tx[:], tx[:]...)),
					MaxFeePerGas: fees.MaxFeePerGas, MaxPriorityFeePerGas: fees.MaxPriorityFeePerGas}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.SetSubState(ctx, fence, tx, state, txmanager.SubStuck, reason); err != nil {
				t.Fatal(err)
			}
			return tx
		}
		refusedSig := stuckAt("console-refused-signature", txmanager.StateAllocated, nonce+1, "signing_refused: signerd answered denied (rule payouts)")
		refusedSend := stuckAt("console-refused-send", txmanager.StateSigned, nonce+2, "broadcast_refused: gas_limit_exceeded: too much gas")
		open := func(tx uuid.UUID) {
			t.Helper()
			b.click(`#nav a[data-route="overview"]`)
			b.follow(fmt.Sprintf(`#attention tr[data-tx="%s"] a`, tx))
			b.waitText("#tx-id", tx.String())
		}

		// ALLOCATED, signerd refused it: every action, abandon included.
		open(refusedSig)
		b.waitText("#tx-fields", "signing_refused")
		for _, name := range []string{"resend", "bump", "cancel", "abandon"} {
			b.wait("#action-" + name)
		}
		b.click("#action-abandon")
		if said := b.confirm("Abandon"); !strings.Contains(said, "abandoned") || !strings.Contains(said, "0-value transfer") {
			t.Errorf("the abandon dialog says %q", said)
		}
		b.waitText(`#tx-oplog tr[data-kind="abandon"]`, "pending")
		actions, err := st.Actions(ctx, refusedSig)
		if err != nil || len(actions) != 1 || actions[0].Action != "abandon" || !strings.HasPrefix(actions[0].Operator, "key:admin") {
			t.Fatalf("recorded actions %+v %v, want one abandon by the admin key", actions, err)
		}
		// The owner abandons it: the page shows the filler, and no action
		// applies any more.
		_, filler, err := st.Abandon(ctx, fence, actions[0], fees)
		if err != nil {
			t.Fatal(err)
		}
		b.click("#tx-refresh")
		b.waitText(`#tx-oplog tr[data-kind="abandon"]`, "done")
		b.wait(fmt.Sprintf(`#tx-oplog tr[data-kind="abandon"] a[data-tx="%s"]`, filler.ID))
		b.waitText("#tx-actions-body", "No action applies to a FAILED transaction")

		// SIGNED, every route refused it: resend.
		open(refusedSend)
		b.waitText("#tx-fields", "broadcast_refused")
		b.click("#action-resend")
		b.confirm("Resend")
		b.waitText(`#tx-oplog tr[data-kind="resend"]`, "pending")
		b.screenshot("console-tx-stuck-signed")
	})

	t.Run("overview at 1280x800", func(t *testing.T) {
		b.click(`#nav a[data-route="overview"]`)
		b.waitText(fmt.Sprintf(`#signers tr[data-signer="31337:%s"] td.owner`, signerA.Hex()), "node-1")
		b.wait(`#approvals tbody tr`)
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 1280 {
			t.Errorf("the overview is %d px wide, wider than the 1280 px window", w)
		}
		b.screenshot("console-overview")
	})

	t.Run("wallets", func(t *testing.T) {
		b.click(`#nav a[data-route="wallets"]`)
		b.waitText(`#wallet-balances tr[data-asset="native"] td.balance`, walletBalance)
		if got := eval[string](b, `document.querySelector("#wallets-signer").value`); !strings.EqualFold(got, "31337:"+gatewaystack.SignerA) {
			t.Errorf("the view shows signer %q, want A's", got)
		}
		b.waitText(fmt.Sprintf(`#wallet-balances tr[data-asset="%s"] td.balance`, walletToken), "5")
		// The native wallet's statement, oldest first, a page of 50 and
		// then the rest: the last running balance is the balance.
		first := fmt.Sprintf(`#wallet-statement tbody tr[data-journal="%d"]`, opening)
		b.waitText(first+" td.balance", "5 ETH")
		b.waitText(first, "opening")
		rows := `document.querySelectorAll("#wallet-statement tbody tr[data-entry]").length`
		if n := eval[int](b, rows); n != 50 {
			t.Errorf("the first page shows %d entries, want 50", n)
		}
		b.click("#wallet-statement-more button")
		b.waitText(`#wallet-statement tbody tr[data-entry]:nth-child(53) td.balance`, walletBalance)
		if n := eval[int](b, rows); n != 53 {
			t.Errorf("after the next page, %d entries, want 53", n)
		}
		b.waitText(`#wallet-statement tbody tr[data-entry]:nth-child(51) td.amount`, "-")
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 1280 {
			t.Errorf("the wallets view is %d px wide, wider than the 1280 px window", w)
		}
		b.screenshot("console-wallets")

		// As of block 1: the opening balance alone.
		b.do("ask for block 1", chromedp.SetValue(chromedp.CSS("#wallets-at-block"), "1"))
		b.click("#wallets-show")
		b.waitText(`#wallet-balances tr[data-asset="native"]`, "as of block 1")
		b.waitText(`#wallet-balances tr[data-asset="native"] td.balance`, "5 ETH")
	})

	t.Run("missing scope", func(t *testing.T) {
		b.signOut()
		b.signIn(g.AcmeRead)
		b.waitText("#who-warn", "admin")
		b.waitText(`#signers .problem[data-status="403"]`, "admin scope")
		b.waitText(`#approvals .problem[data-status="403"]`, "approvals scope")
		b.click(`#nav a[data-route="wallets"]`)
		b.waitText(`#wallet-balances .problem[data-status="403"]`, "ledger:read scope")
	})

	t.Run("another tenant", func(t *testing.T) {
		b.signOut()
		b.signIn(g.Globex)
		b.waitText("#who-tenant", "globex")
		b.wait(fmt.Sprintf(`#signers tr[data-signer="31337:%s"]`, common.HexToAddress(gatewaystack.SignerB).Hex()))
		b.wait(`#approvals td.empty`)
		b.wait(`#attention td.empty`)
		b.click(`#nav a[data-route="txs"]`)
		b.wait(fmt.Sprintf(`#txs tr[data-tx="%s"]`, globexTx.TxID))
		shown := eval[[]string](b, `Array.from(document.querySelectorAll("[data-tx]"), e => e.dataset.tx)`)
		signers := eval[[]string](b, `Array.from(document.querySelectorAll("[data-signer]"), e => e.dataset.signer)`)
		for _, acme := range acmeIDs {
			if slices.Contains(shown, acme) {
				t.Errorf("globex sees acme's transaction %s", acme)
			}
		}
		if len(signers) != 0 {
			t.Errorf("the transactions page lists signers %v", signers)
		}
		// Acme's transaction by its id is not found for globex.
		b.do("go to acme's transaction", chromedp.SendKeys(chromedp.CSS("#goto-id"), toApprove.TxID+"\r"))
		b.waitText(`#main .problem[data-status="404"]`, "Not found")
		if strings.Contains(b.text("#main"), gatewaystack.SignerA) {
			t.Error("globex's page shows acme's signer")
		}
		// Its wallets: its own signer, with nothing booked; acme's signer
		// named in the route is not found.
		b.click(`#nav a[data-route="wallets"]`)
		b.waitText(`#wallet-balances td.empty`, "booked nothing")
		eval[string](b, `location.hash = "#/wallets/31337:`+gatewaystack.SignerA+`"`)
		b.waitText(`#wallet-balances .problem[data-status="404"]`, "Not found")
		if strings.Contains(b.text("#main"), walletBalance) || eval[int](b, `document.querySelectorAll("#wallet-statement tr[data-entry]").length`) != 0 {
			t.Error("globex's wallets view shows acme's books")
		}
	})

	b.signOut()
	if eval[bool](b, `sessionStorage.length === 0`) != true {
		t.Error("sign-out left the key in sessionStorage")
	}
	for _, p := range b.takeProblems() {
		t.Errorf("the page reported: %s", p)
	}
}
