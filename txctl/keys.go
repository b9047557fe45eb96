package txctl

import (
	"flag"
	"net/http"
	"strings"

	"github.com/txfence/txfence/openapi/gatewayapi"
)

var allScopes = []gatewayapi.Scope{gatewayapi.ScopeTxWrite, gatewayapi.ScopeTxRead, gatewayapi.ScopeApprovals,
	gatewayapi.ScopeWebhooks, gatewayapi.ScopeAdmin, gatewayapi.ScopeLedgerRead}

func keyCommands() []*command {
	const group = "API keys"
	return []*command{
		{name: "keys create", group: group, summary: "make an API key for the tenant (scope admin); its token is shown once",
			args: "--name NAME --scope SCOPE... [--signer CHAIN_ID:ADDRESS]... [--expires TIME]", define: defineKeyCreate},
		{name: "keys list", group: group, summary: "the tenant's API keys, newest first (scope admin)",
			define: func(*flag.FlagSet) func(*env, []string) error { return runKeyList }},
		{name: "keys revoke", group: group, summary: "revoke an API key (scope admin)", args: "ID", minArgs: 1, maxArgs: 1,
			about: `The key stops working on every gateway node within the key cache's
lifetime (5 s by default). Revoking a revoked key answers it again.`,
			define: func(*flag.FlagSet) func(*env, []string) error { return runKeyRevoke }},
		{name: "me", group: group, summary: "the key in use: its tenant, name, scopes and signers",
			define: func(*flag.FlagSet) func(*env, []string) error { return runMe }},
	}
}

func defineKeyCreate(fs *flag.FlagSet) func(*env, []string) error {
	var name, expires string
	var scopes, signers multiFlag
	fs.StringVar(&name, "name", "", "the key's `NAME`, recorded as the operator of its actions (required)")
	fs.Var(&scopes, "scope", "a `SCOPE` (repeatable, at least one): tx:write, tx:read, approvals, webhooks, admin, ledger:read")
	fs.Var(&signers, "signer", "only this signer, `CHAIN_ID:ADDRESS` (repeatable; default all the tenant's)")
	fs.StringVar(&expires, "expires", "", "when the key stops working: `TIME` (RFC 3339) or a duration from now (720h)")
	return func(x *env, _ []string) error {
		if name == "" || len(scopes) == 0 {
			return usagef("keys create", "keys create needs --name and at least one --scope")
		}
		body := gatewayapi.KeyCreateRequest{Name: name}
		for _, s := range scopes {
			scope, err := enumFlag("keys create", "scope", s, gatewayapi.Scope.Valid, allScopes...)
			if err != nil {
				return err
			}
			body.Scopes = append(body.Scopes, scope)
		}
		if len(signers) > 0 {
			s := []string(signers)
			body.Signers = &s
		}
		if expires != "" {
			t, err := parseTimeOrIn("keys create", "expires", expires, x.now())
			if err != nil {
				return err
			}
			body.ExpiresAt = &t
		}
		resp, err := x.api.CreateKeyWithResponse(x.ctx, body)
		if err := x.check("create key", resp, err, http.StatusCreated); err != nil {
			return err
		}
		if x.json {
			return x.jsonLine(resp.Body)
		}
		k := resp.JSON201
		return printKey(x, gatewayapi.Key{KeyId: k.KeyId, Name: k.Name, Scopes: k.Scopes, Signers: k.Signers,
			ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt}, func(f *fields) {
			f.add("token", k.Token+"   (shown only now: txfence keeps only its hash)")
		})
	}
}

func printKey(x *env, k gatewayapi.Key, extra func(*fields)) error {
	var f fields
	if extra != nil {
		extra(&f)
	}
	keyFields(&f, k)
	return f.write(x.stdout)
}

func keyFields(f *fields, k gatewayapi.Key) {
	f.add("key_id", k.KeyId.String())
	f.add("name", k.Name)
	f.add("scopes", joinScopes(k.Scopes))
	f.add("signers", joinSigners(k.Signers))
	f.time("expires_at", k.ExpiresAt)
	f.time("revoked_at", k.RevokedAt)
	f.add("created_at", formatTime(k.CreatedAt))
}

func joinScopes(scopes []gatewayapi.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}

func runKeyList(x *env, _ []string) error {
	resp, err := x.api.ListKeysWithResponse(x.ctx)
	if err := x.check("list keys", resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	t := newTable(x.stdout, "KEY_ID", "NAME", "SCOPES", "SIGNERS", "CREATED", "EXPIRES", "REVOKED")
	for _, k := range resp.JSON200.Keys {
		t.row(k.KeyId.String(), k.Name, joinScopes(k.Scopes), joinSigners(k.Signers), formatTime(k.CreatedAt),
			formatTimePtr(k.ExpiresAt), formatTimePtr(k.RevokedAt))
	}
	return t.flush()
}

func runKeyRevoke(x *env, args []string) error {
	id, err := parseID("keys revoke", "key", args[0])
	if err != nil {
		return err
	}
	resp, err := x.api.RevokeKeyWithResponse(x.ctx, id)
	if err := x.check("revoke key "+id.String(), resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	return printKey(x, *resp.JSON200, nil)
}

func runMe(x *env, _ []string) error {
	resp, err := x.api.GetMeWithResponse(x.ctx)
	if err := x.check("who am I", resp, err, http.StatusOK); err != nil {
		return err
	}
	if x.json {
		return x.jsonLine(resp.Body)
	}
	me := resp.JSON200
	var f fields
	f.add("tenant", me.TenantName+" ("+me.TenantId.String()+")")
	keyFields(&f, me.Key)
	return f.write(x.stdout)
}
