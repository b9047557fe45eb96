package signerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/signer-zonec/keystore"
	"github.com/txfence/txfence/signer-zonec/signerd"
	"github.com/txfence/txfence/signer-zonec/signerd/devsignerd"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var prefix = signerd.Spec.EnvPrefix

// baseEnv is a signerd environment with its own migrated database, the
// test PKI and the development policy, but no key backend yet.
func baseEnv(t *testing.T) (pki string, env map[string]string) {
	t.Helper()
	pki = servicetest.PKI(t)
	policyFile, err := filepath.Abs("../testdata/policy/development.json")
	if err != nil {
		t.Fatal(err)
	}
	// The database as a deployment has it: its owner migrates, and signerd
	// serves as a role that cannot change its audit log.
	env = servicetest.Merge(servicetest.TLSEnv(prefix, pki, signerd.Spec.Identity),
		signertest.NewDatabase(t).Env(prefix), signertest.CheckpointEnv(t, prefix), map[string]string{
			prefix + "POLICY_FILE": policyFile,
			prefix + "LOCK_MEMORY": "false", // signerd runs inside the test binary here
		})
	servicetest.MigrateTwice(t, signerd.Run, env)
	return pki, env
}

// keystoreEnv holds anvil's public development keys in a local keystore
// (written with a light scrypt cost to keep the test fast), which
// signerd-dev (devsignerd.Run) serves from and deployed signerd refuses.
func keystoreEnv(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	ks, err := keystore.Open(keystore.Config{Dir: dir, Passphrase: "test-only", ScryptN: 1 << 12, ScryptP: 6})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range signertest.DevKeys {
		if _, err := ks.Import(context.Background(), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	_ = ks.Close()
	return map[string]string{prefix + "KEY_BACKEND": "keystore", prefix + "KEYSTORE_DIR": dir, prefix + "KEYSTORE_PASSPHRASE": "test-only"}
}

// transferJSON is a transfer request whose tip is a thirtieth of its fee
// cap, so raising the cap by 10% raises both.
func transferJSON(txID string, nonce int, value, maxFee string) string {
	fee, _ := new(big.Int).SetString(maxFee, 10)
	tip := new(big.Int).Div(fee, big.NewInt(30))
	return fmt.Sprintf(`{"tx_id":%q,"chain_id":31337,"from":%q,"nonce":%d,"type":"eip1559","to":%q,"value":%q,
		"gas":21000,"max_fee_per_gas":%q,"max_priority_fee_per_gas":%q}`,
		txID, signertest.DevAddress(0).Hex(), nonce, signertest.DevAddress(1).Hex(), value, maxFee, tip.String())
}

// sign posts one request as txmanager and returns the status and outcome.
func sign(t *testing.T, c *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(url+"/v1/sign", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct{ Outcome string }
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &res)
	if res.Outcome == "" {
		return resp.StatusCode, string(b)
	}
	return resp.StatusCode, res.Outcome
}

// TestRunServesHealthOverMTLS runs the real signerd on port 0: migrate
// (twice), serve, health over mutual TLS, a refusal without a certificate,
// metrics on the plain ops listener, and a signature.
func TestRunServesHealthOverMTLS(t *testing.T) {
	t.Parallel()
	pki, env := baseEnv(t)
	env = servicetest.Merge(env, keystoreEnv(t), map[string]string{prefix + "OPS_ADDR": "127.0.0.1:0"})
	svc := servicetest.Start(t, devsignerd.Run, nil, env, "internal", "ops")
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "txmanager", signerd.Spec.Identity)

	resp, err := http.Get(svc.URL("ops") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ops /metrics: %d", resp.StatusCode)
	}
	client := servicetest.Client(t, pki, "txmanager", signerd.Spec.Identity)
	if code, outcome := sign(t, client, svc.URL("internal"), transferJSON("tx-1", 0, "1", "30000000000")); code != 200 || outcome != "signed" {
		t.Errorf("sign: %d %s", code, outcome)
	}
	for _, k := range signertest.DevKeys {
		if strings.Contains(svc.Logs(), k) || strings.Contains(svc.Logs(), "test-only") {
			t.Fatal("a private key or the keystore passphrase appears in signerd's logs")
		}
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	_, err := servicetest.RunOnce(t, signerd.Run, nil, map[string]string{prefix + "LOG_FORMAT": "xml"})
	for _, want := range []string{"TXFENCE_SIGNER_DATABASE_URL is required", "TXFENCE_SIGNER_TLS_CA_FILE is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v; want it to say %q", err, want)
		}
	}
	if _, err := servicetest.RunOnce(t, signerd.Run, []string{"sign-everything"}, nil); err == nil || !strings.Contains(err.Error(), `unknown command "sign-everything"`) {
		t.Errorf("an unknown command: %v", err)
	}
	_, env := baseEnv(t)
	delete(env, prefix+"POLICY_FILE")
	if _, err := servicetest.RunOnce(t, devsignerd.Run, nil, servicetest.Merge(env, keystoreEnv(t))); err == nil || !strings.Contains(err.Error(), "POLICY_FILE is required") {
		t.Errorf("serving without a policy: %v", err)
	}
	_, env = baseEnv(t)
	env[prefix+"MAX_NONCE_AHEAD"] = "0"
	if _, err := servicetest.RunOnce(t, devsignerd.Run, nil, servicetest.Merge(env, keystoreEnv(t))); err == nil || !strings.Contains(err.Error(), "MAX_NONCE_AHEAD=0") {
		t.Errorf("a look-ahead of 0: %v", err)
	}
	_, env = baseEnv(t)
	if _, err := servicetest.RunOnce(t, signerd.Run, nil, env); err == nil || !strings.Contains(err.Error(), "no key backend configured") {
		t.Errorf("serving without keys: %v", err)
	}
}

// TestDeployedSignerdHasNoKeystore: signerd, as deployed, refuses the
// development keystore before it opens anything, and says where it is;
// signerd-dev serves from it. The operator's commands are signerctl's.
func TestDeployedSignerdHasNoKeystore(t *testing.T) {
	t.Parallel()
	_, env := baseEnv(t)
	env = servicetest.Merge(env, keystoreEnv(t))
	_, err := servicetest.RunOnce(t, signerd.Run, nil, env)
	for _, want := range []string{"KEY_BACKEND=keystore", "not built into signerd", "Vault", "signerd-dev"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("signerd with KEY_BACKEND=keystore: %v; want a refusal saying %q", err, want)
		}
	}
	servicetest.Start(t, devsignerd.Run, nil, env, "internal")

	env[prefix+"KEY_BACKEND"] = "hsm"
	if _, err := servicetest.RunOnce(t, signerd.Run, nil, env); err == nil || !strings.Contains(err.Error(), `KEY_BACKEND="hsm": want vault`) {
		t.Errorf("signerd with KEY_BACKEND=hsm: %v", err)
	}
	if _, err := servicetest.RunOnce(t, devsignerd.Run, nil, env); err == nil || !strings.Contains(err.Error(), `want vault or keystore`) {
		t.Errorf("signerd-dev with KEY_BACKEND=hsm: %v", err)
	}
	// The keystore is chosen by name only, never because its directory
	// is set.
	delete(env, prefix+"KEY_BACKEND")
	if _, err := servicetest.RunOnce(t, devsignerd.Run, nil, env); err == nil || !strings.Contains(err.Error(), "no key backend configured") {
		t.Errorf("signerd-dev with KEYSTORE_DIR but no KEY_BACKEND: %v", err)
	}

	for _, cmd := range []string{"keys", "audit"} {
		if _, err := servicetest.RunOnce(t, signerd.Run, []string{cmd, "list"}, nil); err == nil || !strings.Contains(err.Error(), "run signerctl "+cmd) {
			t.Errorf("signerd %s: %v; want it to point at signerctl", cmd, err)
		}
	}
}

// TestTwoProcessesSignOneIntentPerNonce runs two signerd processes on one
// store, and has many goroutines race different intents at one nonce
// across both: exactly one is signed. Then a fee bump of that intent is
// signed, and a lower fee is refused.
func TestTwoProcessesSignOneIntentPerNonce(t *testing.T) {
	t.Parallel()
	pki, env := baseEnv(t)
	env = servicetest.Merge(env, keystoreEnv(t), map[string]string{prefix + "LOCK_MEMORY": "true", prefix + "MAX_NONCE_AHEAD": "8"})
	bin := servicetest.Build(t, "github.com/txfence/txfence/signer-zonec/cmd/signerd-dev")
	procs := []*servicetest.Process{
		servicetest.StartProcess(t, bin, nil, env, "internal"),
		servicetest.StartProcess(t, bin, nil, env, "internal"),
	}
	client := servicetest.Client(t, pki, "txmanager", signerd.Spec.Identity)

	const racers = 40
	outcomes := make(chan string, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			_, outcome := sign(t, client, procs[i%2].URL("internal"), transferJSON(fmt.Sprintf("tx-%d", i), 5, fmt.Sprint(1000+i), "30000000000"))
			outcomes <- outcome
		})
	}
	wg.Wait()
	close(outcomes)
	count := map[string]int{}
	var winner string
	for o := range outcomes {
		count[o]++
	}
	if count["signed"] != 1 || count["refused"] != racers-1 {
		t.Fatalf("outcomes %v; want exactly one signed and the rest refused", count)
	}
	// Find the winning intent through the audit API and bump it.
	resp, err := client.Get(procs[0].URL("internal") + "/v1/audit?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Records []struct {
			Entry struct {
				TxID    string `json:"tx_id"`
				Outcome string `json:"outcome"`
			} `json:"entry"`
		} `json:"records"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	for _, r := range page.Records {
		if r.Entry.Outcome == "signed" {
			winner = r.Entry.TxID
		}
	}
	if len(page.Records) != racers || winner == "" {
		t.Fatalf("%d audit records, winner %q", len(page.Records), winner)
	}
	var i int
	fmt.Sscanf(winner, "tx-%d", &i)
	value := fmt.Sprint(1000 + i)
	if _, o := sign(t, client, procs[1].URL("internal"), transferJSON(winner, 5, value, "33000000000")); o != "signed" {
		t.Errorf("a 10%% fee bump of the winning intent: %s", o)
	}
	if _, o := sign(t, client, procs[0].URL("internal"), transferJSON(winner, 5, value, "20000000000")); o != "refused" {
		t.Errorf("a lower fee at the nonce: %s", o)
	}
	// MAX_NONCE_AHEAD=8: with nonce 5 signed, nonces 6 to 13 are signed,
	// 14 is too far ahead.
	if _, o := sign(t, client, procs[0].URL("internal"), transferJSON("ahead-14", 14, "1", "30000000000")); o != "refused" {
		t.Errorf("nonce 14, 9 above the next: %s", o)
	}
	if _, o := sign(t, client, procs[1].URL("internal"), transferJSON("ahead-13", 13, "1", "30000000000")); o != "signed" {
		t.Errorf("nonce 13, 8 above the next: %s", o)
	}
}

// TestVaultBackedSignerFailsClosed signs with a key held in a real Vault
// dev server (transit-wrapped in KV v2), then seals Vault: signerd stops
// signing, says why, and reports itself not ready.
func TestVaultBackedSignerFailsClosed(t *testing.T) {
	t.Parallel()
	dev := vaulttest.Server(t)
	vcfg := vault.Config{Addr: dev.Addr, AllowPlaintextHTTP: true, Token: config.Secret(dev.RootToken), Timeout: 5 * time.Second, HealthInterval: 50 * time.Millisecond, KeyRecheckInterval: time.Second}
	dev.CreateTransitKey(t, "txfence-signer")
	ctx := context.Background()
	backend, err := vault.Open(ctx, vcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backend.Import(ctx, []byte(signertest.DevKeys[0])); err != nil {
		t.Fatal(err)
	}
	_ = backend.Close()

	pki, env := baseEnv(t)
	env = servicetest.Merge(env, map[string]string{
		prefix + "KEY_BACKEND":           "vault",
		prefix + "VAULT_ADDR":            dev.Addr,
		prefix + "VAULT_TOKEN":           dev.RootToken,
		prefix + "VAULT_HEALTH_INTERVAL": "50ms",
		// The dev server listens on loopback over plain HTTP.
		prefix + "VAULT_ALLOW_PLAINTEXT_HTTP": "true",
	})
	svc := servicetest.Start(t, signerd.Run, nil, env, "internal")
	client := servicetest.Client(t, pki, "txmanager", signerd.Spec.Identity)
	if code, o := sign(t, client, svc.URL("internal"), transferJSON("tx-1", 0, "1", "30000000000")); code != 200 || o != "signed" {
		t.Fatalf("sign with Vault up: %d %s\n%s", code, o, svc.Logs())
	}

	dev.Seal(t)
	sealed := time.Now()
	deadline := sealed.Add(10 * time.Second)
	for nonce := 1; ; nonce++ {
		code, body := sign(t, client, svc.URL("internal"), transferJSON(fmt.Sprintf("tx-%d", nonce), nonce, "1", "30000000000"))
		if code == http.StatusServiceUnavailable && strings.Contains(body, "key backend unavailable") {
			break
		}
		// A key may be used for one health interval (50 ms) after Vault
		// last vouched for it; never later.
		if code == 200 && body == "signed" && time.Since(sealed) > 500*time.Millisecond {
			t.Fatal("signerd signed with Vault sealed")
		}
		if time.Now().After(deadline) {
			t.Fatalf("with Vault sealed: %d %s", code, body)
		}
	}
	resp, err := client.Get(svc.URL("internal") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "sealed") {
		t.Errorf("readyz with Vault sealed: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(svc.Logs(), dev.RootToken) {
		t.Error("the Vault token appears in signerd's logs")
	}
}

func TestRunRefusesToStartWithoutItsVault(t *testing.T) {
	t.Parallel()
	_, env := baseEnv(t)
	env = servicetest.Merge(env, map[string]string{
		prefix + "KEY_BACKEND": "vault", prefix + "VAULT_ADDR": "http://127.0.0.1:1",
		prefix + "VAULT_TOKEN": "dev-only-token", prefix + "VAULT_TIMEOUT": "1s",
		prefix + "VAULT_ALLOW_PLAINTEXT_HTTP": "true", // refused for being unreachable, not for plain http
	})
	logs, err := servicetest.RunOnce(t, signerd.Run, nil, env)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "vault") {
		t.Errorf("Vault unreachable at start: %v; want signerd to refuse, naming Vault", err)
	}
	if strings.Contains(logs, "dev-only-token") {
		t.Error("the Vault token appears in the logs")
	}
}
