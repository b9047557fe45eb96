package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/webhook"
)

// TestARestrictedKeyCannotWidenItself: a tenant owns signers A and C. An
// admin key limited to A cannot mint a key beyond itself (unrestricted,
// for C, or with a scope it lacks), lists only the keys within its reach
// and cannot revoke the others; a webhooks key limited to A cannot
// subscribe to every signer or to C, nor see, change, replay, test or read
// the deliveries of a subscription that reaches beyond A. Every refusal is
// a problem document; every listing is filtered.
func TestARestrictedKeyCannotWidenItself(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Webhooks: &webhook.Options{FeedWait: time.Second}})
	ctx := context.Background()
	signerC := gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress("0x0000000000000000000000000000000000000c0c")}
	if err := g.Store.AssignSigner(ctx, g.AcmeTenant.ID, signerC); err != nil {
		t.Fatal(err)
	}
	a := "31337:" + common.HexToAddress(gatewaystack.SignerA).Hex()
	c := signerC.String()
	refA, _ := gateway.ParseSignerRef(a)
	limitedAdmin := g.Key(t, g.AcmeTenant, "admin-a", []gateway.Scope{gateway.ScopeAdmin, gateway.ScopeTxRead}, []gateway.SignerRef{refA})
	limitedHooks := g.Key(t, g.AcmeTenant, "hooks-a", []gateway.Scope{gateway.ScopeWebhooks}, []gateway.SignerRef{refA})

	for _, body := range []string{
		`{"name": "wide", "scopes": ["admin"]}`,
		fmt.Sprintf(`{"name": "c", "scopes": ["tx:read"], "signers": [%q]}`, c),
		fmt.Sprintf(`{"name": "a-and-c", "scopes": ["tx:read"], "signers": [%q, %q]}`, a, c),
		fmt.Sprintf(`{"name": "more scopes", "scopes": ["tx:write"], "signers": [%q]}`, a),
	} {
		resp, b := g.Do(t, limitedAdmin, "POST", "/api/v1/keys", body)
		if resp.StatusCode != http.StatusForbidden || decode[problem](t, b).Status != http.StatusForbidden {
			t.Errorf("the key limited to A made %s: %d %s, want a 403 problem", body, resp.StatusCode, b)
		}
	}
	resp, b := g.Do(t, limitedAdmin, "POST", "/api/v1/keys", fmt.Sprintf(`{"name": "narrow", "scopes": ["tx:read"], "signers": [%q]}`, a))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a key within the reach of the key limited to A: %d %s", resp.StatusCode, b)
	}

	// Listing: the limited admin sees itself and the key it made, not the
	// tenant's unrestricted keys, nor the webhooks key (a scope it lacks).
	resp, b = g.Do(t, limitedAdmin, "GET", "/api/v1/keys", "")
	listed := string(b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(listed, `"name":"admin-a"`) || !strings.Contains(listed, `"name":"narrow"`) ||
		strings.Contains(listed, `"name":"admin"`) || strings.Contains(listed, `"name":"reader"`) || strings.Contains(listed, `"name":"hooks-a"`) {
		t.Errorf("the key limited to A lists: %d %s", resp.StatusCode, b)
	}
	keys, err := g.Store.Keys(ctx, g.AcmeTenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == "admin" || k.Name == "reader" {
			if resp, b := g.Do(t, limitedAdmin, "DELETE", "/api/v1/keys/"+k.ID.String(), ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("the key limited to A revoked %q: %d %s, want 404", k.Name, resp.StatusCode, b)
			}
		}
	}
	if resp, _ := g.Do(t, g.Acme, "GET", "/api/v1/me", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("the tenant's admin key after the attempts: %d", resp.StatusCode)
	}

	// Webhooks.
	for _, body := range []string{
		`{"url": "https://hooks.example.com/all"}`,
		fmt.Sprintf(`{"url": "https://hooks.example.com/c", "signers": [%q]}`, c),
		fmt.Sprintf(`{"url": "https://hooks.example.com/ac", "signers": [%q, %q]}`, a, c),
	} {
		resp, b := g.Do(t, limitedHooks, "POST", "/api/v1/webhooks", body)
		if resp.StatusCode != http.StatusForbidden || decode[problem](t, b).Status != http.StatusForbidden {
			t.Errorf("the webhooks key limited to A subscribed %s: %d %s, want a 403 problem", body, resp.StatusCode, b)
		}
	}
	resp, b = g.Do(t, limitedHooks, "POST", "/api/v1/webhooks", fmt.Sprintf(`{"url": "https://hooks.example.com/a", "signers": [%q]}`, a))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a subscription to A by the key limited to A: %d %s", resp.StatusCode, b)
	}
	mine := decode[webhookID](t, b).ID
	if resp, b := g.Do(t, limitedHooks, "PATCH", "/api/v1/webhooks/"+mine, `{"signers": []}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("widening its own subscription to every signer: %d %s, want 403", resp.StatusCode, b)
	}
	resp, b = g.Do(t, g.Acme, "POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/tenant-wide"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the tenant's subscription: %d %s", resp.StatusCode, b)
	}
	wide := decode[webhookID](t, b).ID
	for _, call := range []struct{ method, path, body string }{
		{"GET", "/api/v1/webhooks/" + wide, ""},
		{"PATCH", "/api/v1/webhooks/" + wide, fmt.Sprintf(`{"url": "https://attacker.example.com/x", "signers": [%q]}`, a)},
		{"DELETE", "/api/v1/webhooks/" + wide, ""},
		{"POST", "/api/v1/webhooks/" + wide + "/rotate-secret", `{"grace_seconds": 0}`},
		{"POST", "/api/v1/webhooks/" + wide + "/test", ""},
		{"GET", "/api/v1/webhooks/" + wide + "/deliveries", ""},
		{"POST", "/api/v1/webhooks/" + wide + "/replay", `{"from_seq": 1}`},
	} {
		if resp, b := g.Do(t, limitedHooks, call.method, call.path, call.body); resp.StatusCode != http.StatusNotFound {
			t.Errorf("the key limited to A: %s %s: %d %s, want 404", call.method, call.path, resp.StatusCode, b)
		}
	}
	resp, b = g.Do(t, limitedHooks, "GET", "/api/v1/webhooks", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), mine) || strings.Contains(string(b), wide) {
		t.Errorf("the key limited to A lists: %d %s; want its subscription only", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "GET", "/api/v1/webhooks/"+wide, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "tenant-wide") {
		t.Errorf("the tenant-wide subscription after the attempts: %d %s", resp.StatusCode, b)
	}
}
