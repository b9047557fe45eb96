package txctl_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/txctl"
)

// TestTransactions runs the transaction commands against the real API:
// create and its replay, get, list across pages, --json, and how usage
// errors, API problems, a bad key and another tenant's key end.
func TestTransactions(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{})
	create := []string{"create", "--chain-id", "31337", "--from", signerA, "--to", bob, "--value", "1000", "--route", "public",
		"--metadata", `{"order": 123456789012345678901234567890}`}

	// A create, then the same again under the same key: replayed.
	first := mustRun(t, g.URL, g.Acme, append(create, "--idempotency-key", "order-1")...)
	id := field(t, first.stdout, "tx_id")
	if state := field(t, first.stdout, "state"); state != "INIT" {
		t.Errorf("a new transaction is %s, want INIT:\n%s", state, first.stdout)
	}
	if !strings.Contains(first.stdout, "123456789012345678901234567890") {
		t.Errorf("the metadata lost digits:\n%s", first.stdout)
	}
	again := mustRun(t, g.URL, g.Acme, append(create, "--idempotency-key", "order-1")...)
	if field(t, again.stdout, "tx_id") != id || !strings.Contains(again.stdout, "replayed") {
		t.Errorf("a retried create does not say replayed:\n%s", again.stdout)
	}
	if strings.Contains(first.stdout, "replayed") {
		t.Errorf("a first create says replayed:\n%s", first.stdout)
	}

	// Without a key txctl makes one and prints it first, so that a
	// script can retry with it.
	made := mustRun(t, g.URL, g.Acme, create...)
	key := regexp.MustCompile(`idempotency key ([0-9a-f-]{36})`).FindStringSubmatch(made.stderr)
	if key == nil {
		t.Fatalf("no idempotency key printed:\n%s", made.stderr)
	}
	if got := field(t, made.stdout, "request_id"); got != key[1] {
		t.Errorf("request_id %s, printed key %s", got, key[1])
	}
	retried := mustRun(t, g.URL, g.Acme, append([]string{"--json"}, append(create, "--idempotency-key", key[1])...)...)
	if tx := decodeJSON[components.Tx](t, retried.stdout); tx.TxId.String() != field(t, made.stdout, "tx_id") || !strings.Contains(retried.stderr, "replayed") {
		t.Errorf("retry with the printed key: %s / %s", retried.stdout, retried.stderr)
	}

	// Metadata from standard input, for what a shell cannot quote
	// (globex's, so that acme's counts below stay as they are).
	var in, out, errb strings.Builder
	in.WriteString(`{"note": "it's \"quoted\""}`)
	getenv := func(name string) string { return map[string]string{txctl.EnvURL: g.URL, txctl.EnvKey: g.Globex}[name] }
	if err := txctl.Run(context.Background(), []string{"--json", "create", "--chain-id", "31337", "--from", signerB, "--to", bob, "--metadata", "-"}, getenv,
		strings.NewReader(in.String()), &out, &errb); err != nil || !strings.Contains(out.String(), `"metadata":{"note":"it's \"quoted\""}`) {
		t.Errorf("--metadata -: %v\n%s\n%s", err, out.String(), errb.String())
	}

	// get, by id and by request id; --json prints the API's document as
	// it came.
	if got := mustRun(t, g.URL, g.Acme, "get", id); field(t, got.stdout, "tx_id") != id || !strings.EqualFold(field(t, got.stdout, "from"), signerA) {
		t.Errorf("get:\n%s", got.stdout)
	}
	byRequest := mustRun(t, g.URL, g.AcmeRead, "get", "--request-id", "order-1", "--chain-id", "31337", "--from", signerA)
	if field(t, byRequest.stdout, "tx_id") != id {
		t.Errorf("get --request-id:\n%s", byRequest.stdout)
	}
	asJSON := mustRun(t, g.URL, g.Acme, "--json", "get", id)
	if want := rawGet(t, g, g.Acme, "/api/v1/tx/"+id) + "\n"; asJSON.stdout != want {
		t.Errorf("get --json printed\n%s\nthe API sent\n%s", asJSON.stdout, want)
	}
	conforms(t, asJSON.stdout, "/api/v1/tx/{tx_id}", "GET", 200, "")

	// list --all follows the cursors: 5 transactions, pages of 2.
	for _, k := range []string{"order-2", "order-3", "order-4"} {
		g.Create(t, g.Acme, signerA, k)
	}
	g.Create(t, g.Globex, signerB, "globex-1")
	pages := lines(mustRun(t, g.URL, g.AcmeRead, "--json", "list", "--limit", "2", "--all").stdout)
	if len(pages) != 3 {
		t.Fatalf("list --all in pages of 2 printed %d pages, want 3:\n%s", len(pages), strings.Join(pages, "\n"))
	}
	seen := map[string]bool{}
	for i, p := range pages {
		conforms(t, p, "/api/v1/tx", "GET", 200, "")
		page := decodeJSON[components.TxList](t, p)
		for _, tx := range page.Transactions {
			if seen[tx.TxId.String()] {
				t.Errorf("%s listed twice", tx.TxId)
			}
			seen[tx.TxId.String()] = true
		}
		if last := i == len(pages)-1; last != (page.NextCursor == nil) {
			t.Errorf("page %d has next_cursor %v", i, page.NextCursor)
		}
	}
	if len(seen) != 5 || !seen[id] {
		t.Errorf("list --all saw %d of acme's 5 transactions: %v", len(seen), seen)
	}
	text := mustRun(t, g.URL, g.AcmeRead, "list", "--limit", "2", "--all").stdout
	if n := strings.Count(text, "TX_ID"); n != 1 || len(lines(text)) != 6 || !strings.Contains(text, id) {
		t.Errorf("list --all as text (one header, 5 rows):\n%s", text)
	}
	if one := mustRun(t, g.URL, g.AcmeRead, "list", "--limit", "2").stdout; len(lines(one)) != 4 || !strings.Contains(one, "more: --cursor ") {
		t.Errorf("one page of a longer list:\n%s", one)
	}
	if filtered := mustRun(t, g.URL, g.AcmeRead, "list", "--state", "CANCELLED").stdout; len(lines(filtered)) != 1 {
		t.Errorf("nothing is cancelled yet:\n%s", filtered)
	}

	// Usage errors exit 2, say what is wrong and send nothing.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--chain-id", "abc", "--from", signerA}, `invalid value "abc" for flag -chain-id`},
		{[]string{"create", "--from", signerA}, "create needs --chain-id and --from"},
		{[]string{"create", "--chain-id", "31337", "--from", signerA, "--metadata", "[1]"}, "--metadata: want a JSON object"},
		{[]string{"create", "--chain-id", "31337", "--from", signerA, "--route", "fast"}, `--route "fast": want one of public, private, auto`},
		{[]string{"get", "not-a-uuid"}, `"not-a-uuid" is not a transaction id`},
		{[]string{"get", id, "--json"}, "--json is a global flag: put it before the command"},
		{[]string{"get"}, "get takes a transaction ID"},
		{[]string{"list", "--state", "DONE"}, `--state "DONE": want one of INIT`},
		{[]string{"list", "--limit", "5000"}, "--limit 5000: want 1 to 1000"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"webhooks"}, "webhooks needs a subcommand"},
		{[]string{"cancel"}, "cancel takes 1 argument(s)"},
	} {
		r := txctlRun(t, g.URL, g.Acme, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("txctl %s: exit %d, stderr %q, stdout %q; want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, r.stdout, c.want)
		}
	}
	if r := txctlRun(t, "ftp://example", g.Acme, "list"); r.code != 2 || !strings.Contains(r.stderr, "--url") {
		t.Errorf("a bad URL: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, "", "list"); r.code != 2 || !strings.Contains(r.stderr, "TXCTL_KEY") {
		t.Errorf("no key: exit %d %s", r.code, r.stderr)
	}

	// An API problem: title, detail and each failing field, exit 1.
	bad := txctlRun(t, g.URL, g.Acme, "create", "--chain-id", "31337", "--from", signerA, "--to", "0x123", "--value", "1.5")
	if bad.code != 1 || !strings.Contains(bad.stderr, "Bad Request") || !strings.Contains(bad.stderr, "  /to: ") ||
		!strings.Contains(bad.stderr, "  /value: ") || !strings.Contains(bad.stderr, "request id") {
		t.Errorf("a bad address: exit %d\n%s", bad.code, bad.stderr)
	}
	// A key the gateway does not know: 401.
	if r := txctlRun(t, g.URL, "txf_not-a-key", "get", id); r.code != 1 || !strings.Contains(r.stderr, "Unauthorized") {
		t.Errorf("a bad key: exit %d %s", r.code, r.stderr)
	}
	// Globex cannot see acme's transaction: it does not exist for them.
	if r := txctlRun(t, g.URL, g.Globex, "get", id); r.code != 1 || !strings.Contains(r.stderr, "Not Found") || strings.Contains(r.stdout, id) {
		t.Errorf("globex reads acme's transaction: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	// A read-only key cannot write: 403.
	if r := txctlRun(t, g.URL, g.AcmeRead, "cancel", id); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("a read-only key cancels: exit %d %s", r.code, r.stderr)
	}
	// The key never shows, whatever happens.
	for _, r := range []result{first, again, made, bad} {
		if strings.Contains(r.stdout+r.stderr, g.Acme) {
			t.Errorf("the API key was printed")
		}
	}

	// cancel, then the operator commands.
	if cancelled := mustRun(t, g.URL, g.Acme, "cancel", id); !strings.HasPrefix(field(t, cancelled.stdout, "state"), "CANCELLED") {
		t.Errorf("cancel:\n%s", cancelled.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "bump", id); r.code != 1 || !strings.Contains(r.stderr, "Conflict") {
		t.Errorf("bump of a cancelled transaction: exit %d %s", r.code, r.stderr)
	}
	if r := mustRun(t, g.URL, g.AcmeRead, "actions", id); len(lines(r.stdout)) != 1 {
		t.Errorf("actions of a transaction nobody acted on:\n%s", r.stdout)
	}
	if r := mustRun(t, g.URL, g.AcmeRead, "signers"); !strings.Contains(r.stdout, signerA) || strings.Contains(r.stdout, signerB) {
		t.Errorf("acme's signers:\n%s", r.stdout)
	}
	status := mustRun(t, g.URL, g.Acme, "signer", "31337", signerA).stdout
	if field(t, status, "count CANCELLED") != "1" || field(t, status, "count INIT") != "4" {
		t.Errorf("signer status:\n%s", status)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "signer", "31337", signerA).stdout, "/api/v1/signers/{chain_id}/{address}", "GET", 200, "")
	if r := txctlRun(t, g.URL, g.Globex, "signer", "31337", signerA); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
		t.Errorf("globex reads acme's signer: exit %d %s", r.code, r.stderr)
	}
}

// field is the value on the line of text output that starts with name.
func field(t *testing.T, out, name string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q in\n%s", name, out)
	return ""
}

// TestCreateDependsOnSeveral: --depends-on takes comma-separated ids; the
// transaction shows them all, in order, and a bad one is a usage error
// that sends nothing.
func TestCreateDependsOnSeveral(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{})
	p, q := g.Create(t, g.Acme, signerA, "p").TxID, g.Create(t, g.Acme, signerA, "q").TxID
	child := mustRun(t, g.URL, g.Acme, "create", "--chain-id", "31337", "--from", signerA, "--to", bob, "--depends-on", q+", "+p)
	if got := field(t, child.stdout, "depends_on"); got != q+", "+p {
		t.Errorf("depends_on %q, want %q:\n%s", got, q+", "+p, child.stdout)
	}
	asJSON := mustRun(t, g.URL, g.Acme, "--json", "get", field(t, child.stdout, "tx_id"))
	if tx := decodeJSON[components.Tx](t, asJSON.stdout); tx.DependsOn == nil || len(*tx.DependsOn) != 2 || (*tx.DependsOn)[0].String() != q {
		t.Errorf("get --json: %s", asJSON.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "create", "--chain-id", "31337", "--from", signerA, "--depends-on", p+",nope"); r.code != 2 || !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("a bad id: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, g.Acme, "create", "--chain-id", "31337", "--from", signerA, "--to", bob, "--depends-on", p+","+p); r.code != 1 || !strings.Contains(r.stderr, "/depends_on/1") {
		t.Errorf("a repeated id: exit %d %s", r.code, r.stderr)
	}
}
