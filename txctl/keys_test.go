package txctl_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

// TestKeys: an admin makes a key, which works at once and shows in the
// list; revoked, it stops working. me says who is calling.
func TestKeys(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{})

	me := mustRun(t, g.URL, g.Acme, "me").stdout
	if !strings.HasPrefix(field(t, me, "tenant"), "acme (") || field(t, me, "name") != "admin" {
		t.Errorf("me:\n%s", me)
	}

	made := mustRun(t, g.URL, g.Acme, "keys", "create", "--name", "ci", "--scope", "tx:read", "--scope", "approvals",
		"--signer", "31337:"+signerA, "--expires", "720h").stdout
	token, _, _ := strings.Cut(field(t, made, "token"), " ")
	if !strings.HasPrefix(token, "txf_") || field(t, made, "scopes") != "tx:read,approvals" || field(t, made, "expires_at") == "" {
		t.Fatalf("keys create:\n%s", made)
	}
	keyID := field(t, made, "key_id")
	if r := mustRun(t, g.URL, token, "me"); field(t, r.stdout, "name") != "ci" || !strings.Contains(field(t, r.stdout, "signers"), "31337:") {
		t.Errorf("me with the new key:\n%s", r.stdout)
	}
	asJSON := mustRun(t, g.URL, g.Acme, "--json", "keys", "create", "--name", "script", "--scope", "tx:write,tx:read")
	conforms(t, asJSON.stdout, "/api/v1/keys", "POST", 201, "")
	if k := decodeJSON[gatewayapi.KeyCreated](t, asJSON.stdout); !strings.HasPrefix(k.Token, "txf_") {
		t.Errorf("keys create --json: %s", asJSON.stdout)
	}
	list := mustRun(t, g.URL, g.Acme, "keys", "list").stdout
	if !strings.Contains(list, keyID) || !strings.Contains(list, "script") || strings.Contains(list, token) {
		t.Errorf("keys list (never a token):\n%s", list)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "keys", "list").stdout, "/api/v1/keys", "GET", 200, "")

	revoked := mustRun(t, g.URL, g.Acme, "keys", "revoke", keyID).stdout
	if field(t, revoked, "revoked_at") == "" {
		t.Errorf("keys revoke:\n%s", revoked)
	}
	if r := txctlRun(t, g.URL, token, "me"); r.code != 1 || !strings.Contains(r.stderr, "Unauthorized") {
		t.Errorf("a revoked key: exit %d %s", r.code, r.stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--name", "x", "--scope", "root"}, `--scope "root": want one of tx:write`},
		{[]string{"keys", "create", "--scope", "admin"}, "keys create needs --name"},
		{[]string{"keys", "create", "--name", "x", "--scope", "admin", "--expires", "yesterday"}, "--expires \"yesterday\""},
		{[]string{"keys", "revoke", "42"}, `"42" is not a key id`},
		{[]string{"keys", "rotate"}, `unknown command "keys rotate"`},
	} {
		if r := txctlRun(t, g.URL, g.Acme, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("txctl %s: exit %d %s, want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if r := txctlRun(t, g.URL, g.AcmeRead, "keys", "list"); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("keys list with a tx:read key: exit %d %s", r.code, r.stderr)
	}
	// A key naming another tenant's signer: the API's problem, with its
	// field.
	if r := txctlRun(t, g.URL, g.Acme, "keys", "create", "--name", "x", "--scope", "admin", "--signer", "31337:0x123"); r.code != 1 || !strings.Contains(r.stderr, "/signers/0") {
		t.Errorf("keys create with a bad signer: exit %d %s", r.code, r.stderr)
	}
}
