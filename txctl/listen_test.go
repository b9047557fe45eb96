package txctl_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txctl"
)

var listeningRE = regexp.MustCompile(`listening on (http://\S+) \(verifying \d+ secret\(s\)\); subscribe it with: txctl webhooks create --url (\S+)`)

// startListen runs webhooks listen on a free loopback port with flags and
// returns it with the base URL its start line gives.
func startListen(t *testing.T, jsonOut bool, flags ...string) (*background, string) {
	t.Helper()
	args := []string{"webhooks", "listen", "--addr", "127.0.0.1:0"}
	if jsonOut {
		args = append([]string{"--json"}, args...)
	}
	b := startTxctl(t, "", "", append(args, flags...)...)
	start := b.stderr.waitFor(t, "the start line", listeningRE.MatchString)
	m := listeningRE.FindStringSubmatch(start)
	if !strings.HasPrefix(m[1], "http://127.0.0.1:") || m[1] == "http://127.0.0.1:0" || !strings.HasPrefix(m[2], m[1]+"/") {
		t.Errorf("the start line: %s", start)
	}
	return b, m[1]
}

// makeSecret is a fresh whsec_ secret, as the gateway makes them.
func makeSecret(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// signed are the Standard Webhooks headers of a delivery of body as id
// sent at at, name, value pairs, with one signature per secret as the
// gateway signs.
func signed(t *testing.T, id string, at time.Time, body string, secrets ...string) []string {
	t.Helper()
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if sigs[i], err = wh.Sign(id, at, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	return []string{standardwebhooks.HeaderWebhookID, id, standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10),
		standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " ")}
}

// send makes one request with headers (name, value pairs) and returns
// the answer's status and body.
func send(t *testing.T, method, url string, headers []string, body string) (int, string) {
	t.Helper()
	resp, b := servicetest.Do(t, http.DefaultClient, method, url, body, headers...)
	return resp.StatusCode, string(b)
}

// deliver POSTs a delivery of body as id, signed now with secrets.
func deliver(t *testing.T, url, id, body string, secrets ...string) int {
	t.Helper()
	status, _ := send(t, http.MethodPost, url, signed(t, id, time.Now(), body, secrets...), body)
	return status
}

const listenTx = "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7"

// stateChanged is a tx.state_changed event as the gateway sends it.
func stateChanged(seq int) (id, body string) {
	id = fmt.Sprintf("evt_%016x", seq)
	return id, `{"seq":` + strconv.Itoa(seq) + `,"id":"` + id + `","type":"tx.state_changed","tx_id":"` + listenTx + `","chain_id":31337,` +
		`"signer":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","created_at":"2026-11-23T18:40:01Z","data":{"from_state":"INIT","to_state":"SIMULATED"}}`
}

// TestListenVerifies: a verified delivery is answered 204 and printed, a
// repeat is marked, and whatever does not verify is answered 401 (or 405,
// 413) with the reason on standard error and nothing printed.
func TestListenVerifies(t *testing.T) {
	t.Parallel()
	secret := makeSecret(t)
	b, url := startListen(t, false, "--secret", secret)
	if !strings.Contains(b.stderr.String(), "(verifying 1 secret(s)); subscribe it with: txctl webhooks create --url "+url+"/hook\n") {
		t.Errorf("the start line: %s", b.stderr.String())
	}

	id, body := stateChanged(42)
	if status := deliver(t, url+"/hook", id, body, secret); status != http.StatusNoContent {
		t.Fatalf("a valid delivery: %d, want 204", status)
	}
	// The line is written before the answer.
	out := lines(b.stdout.String())
	if len(out) != 1 {
		t.Fatalf("stdout after one delivery:\n%s", b.stdout.String())
	}
	for _, want := range []string{id + "  ", " 42 ", "2026-11-23T18:40:01Z", listenTx, "tx.state_changed", "INIT -> SIMULATED",
		"signer=31337:0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"} {
		if !strings.Contains(out[0], want) {
			t.Errorf("the delivery's line lacks %q: %s", want, out[0])
		}
	}
	if strings.Contains(out[0], "repeat") {
		t.Errorf("a first delivery marked as a repeat: %s", out[0])
	}

	if status := deliver(t, url+"/hook", id, body, secret); status != http.StatusNoContent {
		t.Fatalf("a repeated delivery: %d, want 204", status)
	}
	out = lines(b.stdout.String())
	if len(out) != 2 || !strings.HasPrefix(out[1], id+"  ") || !strings.HasSuffix(out[1], "(repeat: webhook-id seen before)") {
		t.Errorf("a repeat is printed again, marked:\n%s", b.stdout.String())
	}

	id2, body2 := stateChanged(43)
	stale := time.Now().Add(-6 * time.Minute)
	huge := `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, c := range []struct {
		name, method string
		headers      []string
		body         string
		status       int
		why          string
	}{
		{"another secret", http.MethodPost, signed(t, id2, time.Now(), body2, makeSecret(t)), body2, 401, "no signature verifies with the 1 secret(s) given"},
		{"an altered body", http.MethodPost, signed(t, id2, time.Now(), body2, secret), strings.Replace(body2, "SIMULATED", "CONFIRMED", 1), 401, "no signature verifies"},
		{"a stale timestamp", http.MethodPost, signed(t, id2, stale, body2, secret), body2, 401, "more than 5 minutes from this clock"},
		{"no signature", http.MethodPost, []string{standardwebhooks.HeaderWebhookID, id2}, body2, 401, "header is missing"},
		{"a GET", http.MethodGet, signed(t, id2, time.Now(), "", secret), "", 405, "deliveries are POSTs"},
		{"a body over 1 MiB", http.MethodPost, signed(t, id2, time.Now(), huge, secret), huge, 413, "the body is over 1048576 bytes"},
	} {
		before := b.stderr.String()
		status, answer := send(t, c.method, url+"/hook", c.headers, c.body)
		if status != c.status || !strings.Contains(answer, c.why) {
			t.Errorf("%s: %d %q, want %d and %q", c.name, status, answer, c.status, c.why)
		}
		if warning := strings.TrimPrefix(b.stderr.String(), before); !strings.Contains(warning, c.why) || !strings.Contains(warning, strconv.Itoa(c.status)) {
			t.Errorf("%s: the warning on stderr: %q", c.name, warning)
		}
	}
	if got := lines(b.stdout.String()); len(got) != 2 {
		t.Errorf("refused deliveries were printed:\n%s", b.stdout.String())
	}
	if strings.Contains(b.stdout.String()+b.stderr.String(), strings.TrimPrefix(secret, "whsec_")) {
		t.Error("the secret was printed")
	}
}

// TestListenJSON: with --json each verified delivery's body is printed as
// it came, one per line, a repeat too.
func TestListenJSON(t *testing.T) {
	t.Parallel()
	secret := makeSecret(t)
	b, url := startListen(t, true, "--secret", secret)
	id, body := stateChanged(7)
	for range 2 {
		if status := deliver(t, url, id, body, secret); status != http.StatusNoContent {
			t.Fatalf("a valid delivery: %d, want 204", status)
		}
	}
	if got := b.stdout.String(); got != body+"\n"+body+"\n" {
		t.Errorf("--json output:\n%s\nwant the body twice:\n%s", got, body)
	}
	if !strings.Contains(b.stderr.String(), "delivery "+id+" is a repeat") {
		t.Errorf("no note of the repeat on stderr:\n%s", b.stderr.String())
	}
}

// TestListenRotation: with several secrets a delivery passes when any one
// verifies it, alone or beside others in the header; --path confines it.
func TestListenRotation(t *testing.T) {
	t.Parallel()
	oldS, newS := makeSecret(t), makeSecret(t)
	b, url := startListen(t, false, "--secret", oldS, "--secret", newS, "--path", "/in")
	for i, c := range []struct {
		path    string
		secrets []string
		status  int
	}{
		{"/in", []string{newS}, 204},
		{"/in", []string{oldS, newS}, 204},
		{"/in", []string{makeSecret(t), oldS}, 204},
		{"/in", []string{makeSecret(t)}, 401},
		{"/elsewhere", []string{newS}, 404},
	} {
		id, body := stateChanged(100 + i)
		if status := deliver(t, url+c.path, id, body, c.secrets...); status != c.status {
			t.Errorf("delivery %d to %s: %d, want %d", i, c.path, status, c.status)
		}
	}
	if got := lines(b.stdout.String()); len(got) != 3 {
		t.Errorf("want the 3 verified deliveries printed:\n%s", b.stdout.String())
	}
	if !strings.Contains(b.stderr.String(), "(verifying 2 secret(s)); subscribe it with: txctl webhooks create --url "+url+"/in\n") ||
		!strings.Contains(b.stderr.String(), "with the 2 secret(s) given") || !strings.Contains(b.stderr.String(), "takes deliveries on /in") {
		t.Errorf("stderr:\n%s", b.stderr.String())
	}
}

// TestListenCount: --count N ends the command with status 0 once N
// deliveries are verified, and the listener closes.
func TestListenCount(t *testing.T) {
	t.Parallel()
	secret := makeSecret(t)
	b, url := startListen(t, false, "--secret", secret, "--count", "2")
	for i := range 2 {
		if i == 1 { // a refused one does not count
			id, body := stateChanged(9)
			if status := deliver(t, url, id, body, makeSecret(t)); status != http.StatusUnauthorized {
				t.Fatalf("a delivery with another secret: %d", status)
			}
		}
		id, body := stateChanged(10 + i)
		if status := deliver(t, url, id, body, secret); status != http.StatusNoContent {
			t.Fatalf("delivery %d: %d, want 204", i, status)
		}
	}
	if code := b.wait(t); code != 0 {
		t.Fatalf("exit %d after --count 2\nstderr: %s", code, b.stderr.String())
	}
	if got := lines(b.stdout.String()); len(got) != 2 {
		t.Errorf("want 2 lines:\n%s", b.stdout.String())
	}
	if _, err := http.Post(url, "application/json", strings.NewReader("{}")); err == nil {
		t.Error("the listener still answers after --count")
	}
}

// TestListenUsage: bad command lines exit 2 without listening, and the
// secrets can come from TXCTL_WEBHOOK_SECRET. Not parallel: it sets the
// environment.
func TestListenUsage(t *testing.T) {
	t.Setenv(txctl.EnvWebhookSecret, "")
	secret := makeSecret(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "listen"}, "webhooks listen needs --secret (or TXCTL_WEBHOOK_SECRET)"},
		{[]string{"webhooks", "listen", "--secret", "whsec_not*base64"}, "secret 1 of 1 is not a whsec_<base64> secret"},
		{[]string{"webhooks", "listen", "--secret", secret, "--secret", "whsec_"}, "secret 2 of 2 is not"},
		{[]string{"webhooks", "listen", "--secret", secret, "--count", "-1"}, "--count -1"},
		{[]string{"webhooks", "listen", "--secret", secret, "--path", "hook"}, `--path "hook"`},
		{[]string{"webhooks", "listen", "--secret", secret, "extra"}, "takes no arguments"},
	} {
		r := txctlRun(t, "", "", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("txctl %s: exit %d %q, want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
		if strings.Contains(r.stderr, "not*base64") {
			t.Errorf("a secret was printed: %s", r.stderr)
		}
	}

	other := makeSecret(t)
	t.Setenv(txctl.EnvWebhookSecret, secret+","+other)
	b, url := startListen(t, false)
	if !strings.Contains(b.stderr.String(), "(verifying 2 secret(s))") {
		t.Errorf("the secrets of %s: %s", txctl.EnvWebhookSecret, b.stderr.String())
	}
	id, body := stateChanged(5)
	if status := deliver(t, url, id, body, other); status != http.StatusNoContent {
		t.Errorf("a delivery signed with the second secret of %s: %d", txctl.EnvWebhookSecret, status)
	}
}

// TestListenGateway: the real gateway's deliveries, a test one and a
// transaction's events, verify with the subscription's secret, and the
// gateway records them delivered.
func TestListenGateway(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Webhooks: &webhook.Options{BackoffBase: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, FeedWait: time.Second}})
	made := mustRun(t, g.URL, g.Acme, "--json", "webhooks", "create", "--url", "http://127.0.0.1:9/hook", "--event-type", "tx.state_changed", "--disabled")
	hook := decodeJSON[gatewayapi.WebhookCreated](t, made.stdout)
	hookID := hook.Id.String()

	b, url := startListen(t, false, "--secret", hook.Secret)
	mustRun(t, g.URL, g.Acme, "webhooks", "update", hookID, "--url", url+"/hook", "--enable")
	if r := mustRun(t, g.URL, g.Acme, "webhooks", "test", hookID); field(t, r.stdout, "ok") != "true" || field(t, r.stdout, "status_code") != "204" {
		t.Errorf("webhooks test:\n%s", r.stdout)
	}
	if out := lines(b.stdout.String()); len(out) != 1 || !strings.HasPrefix(out[0], "test_") || !strings.HasSuffix(out[0], "  webhook.test") {
		t.Errorf("the test delivery:\n%s", b.stdout.String())
	}

	tx := g.Create(t, g.Acme, signerA, "listened")
	b.stdout.waitFor(t, "a delivery of "+tx.TxID, func(s string) bool {
		return strings.Contains(s, tx.TxID) && strings.Contains(s, "tx.state_changed") && strings.Contains(s, "signer=31337:")
	})
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for { // the outcome is stored just after the listener answers
		log := mustRun(t, g.URL, g.Acme, "webhooks", "deliveries", hookID, "--status", "delivered").stdout
		if strings.Contains(log, tx.TxID) && strings.Contains(log, " 204 ") {
			break
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("no delivered delivery of %s in the log:\n%s", tx.TxID, log)
		}
	}
	if strings.Contains(b.stderr.String(), "refused") {
		t.Errorf("the listener refused a delivery of the gateway:\n%s", b.stderr.String())
	}
}
