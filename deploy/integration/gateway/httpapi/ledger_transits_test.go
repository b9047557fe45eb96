package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

func transitsPath(signer string, query ...string) string {
	return "/api/v1/ledger/transits?chain_id=31337&address=" + signer + strings.Join(query, "")
}

// transitRig is a gateway with a ledger holding acme's transfers from
// signer A on chain 31337 to A's address on chain 10 (one completed, one
// open, one pending) and globex's completed one from signer B, each in
// its tenant's namespace as the ledger keys them, but acme-2, linked
// before namespaces existed.
func transitRig(t *testing.T) *gatewaystack.Gateway {
	t.Helper()
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true})
	bridge := common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
	end := func(chain uint64, signer string, amount int64) ledgertest.TransitEnd {
		return ledgertest.TransitEnd{ChainID: chain, Wallet: common.HexToAddress(signer), Asset: ledger.Native, Amount: amount}
	}
	acme, globex := g.AcmeTenant.ID.String(), g.GlobexTenant.ID.String()
	ledgertest.BookTransit(t, g.Ledger.Store, ledger.TransitKey(acme, "acme-1"), end(31337, signerA, 1000), end(10, signerA, 990), bridge, 2)
	ledgertest.BookTransit(t, g.Ledger.Store, "acme-2", end(31337, signerA, 500), end(10, signerA, 500), bridge, 1)
	ledgertest.BookTransit(t, g.Ledger.Store, ledger.TransitKey(globex, "globex-1"), end(31337, signerB, 70), end(10, signerB, 69), bridge, 2)
	ledgertest.BookTransit(t, g.Ledger.Store, ledger.TransitKey(acme, "acme-3"), end(31337, signerA, 5), end(10, signerA, 5), bridge, 0)
	return g
}

// A tenant lists its signer's transfers, newest first, by status and a
// page at a time, and reads one; another tenant's, or one a key may not
// use, reads exactly as one that does not exist.
func TestLedgerTransits(t *testing.T) {
	t.Parallel()
	g := transitRig(t)
	ids := func(key, path string) []string {
		t.Helper()
		return ledgertest.WalkPages(t, path, func(path string) ([]string, *string) {
			page := read[gatewayapi.LedgerTransitList](t, g, key, path)
			var ids []string
			for _, tr := range page.Transits {
				ids = append(ids, tr.TransitId)
			}
			return ids, page.NextCursor
		})
	}
	for path, want := range map[string][]string{
		transitsPath(signerA):                                          {"acme-3", "acme-2", "acme-1"},
		transitsPath(signerA, "&limit=1"):                              {"acme-3", "acme-2", "acme-1"},
		transitsPath(signerA, "&status=completed"):                     {"acme-1"},
		transitsPath(strings.ToLower(signerA), "&status=open&limit=1"): {"acme-2"},
	} {
		if got := ids(g.Acme, path); !slices.Equal(got, want) {
			t.Errorf("acme GET %s: %v, want %v", path, got, want)
		}
	}
	if got := ids(g.Globex, transitsPath(signerB)); !slices.Equal(got, []string{"globex-1"}) {
		t.Errorf("globex's transfers: %v", got)
	}
	done := read[gatewayapi.LedgerTransit](t, g, g.Acme, "/api/v1/ledger/transits/acme-1")
	if done.Status != "completed" || done.Source.Wallet != strings.ToLower(signerA) || *done.Source.Amount != "1000" ||
		done.Destination == nil || done.Destination.ChainId != 10 || *done.Destination.Amount != "990" || *done.BridgeFee != "10" {
		t.Errorf("acme-1: %+v", done)
	}

	// Not globex's: 404, worded as an unknown transfer, and nothing of
	// acme's in the answer.
	for _, path := range []string{transitsPath(signerA), transitsPath(signerA, "&status=open"), "/api/v1/ledger/transits/acme-1",
		"/api/v1/ledger/transits/acme-3"} {
		resp, body := g.Do(t, g.Globex, "GET", path, "")
		if resp.StatusCode != http.StatusNotFound || (!strings.Contains(path, signerA) && strings.Contains(strings.ToLower(string(body)), strings.ToLower(signerA[2:]))) {
			t.Errorf("globex GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{transitsPath(signerB), "/api/v1/ledger/transits/globex-1"} {
		if resp, body := g.Do(t, g.Acme, "GET", path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("acme GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	_, theirs := g.Do(t, g.Globex, "GET", "/api/v1/ledger/transits/acme-1", "")
	_, none := g.Do(t, g.Globex, "GET", "/api/v1/ledger/transits/nobody", "")
	if p, q := decode[problem](t, theirs), decode[problem](t, none); p.Detail != `no transit "acme-1"` || q.Detail != `no transit "nobody"` {
		t.Errorf("acme's transfer for globex: %q; an unknown one: %q", p.Detail, q.Detail)
	}

	// Scope, bad input, and a gateway without a ledger.
	for _, path := range []string{transitsPath(signerA), "/api/v1/ledger/transits/acme-1"} {
		if resp, body := g.Do(t, g.AcmeRead, "GET", path, ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "ledger:read") {
			t.Errorf("a tx:read key: GET %s: %d %s, want 403", path, resp.StatusCode, body)
		}
	}
	for path, pointer := range map[string]string{
		transitsPath(signerA, "&status=lost"):                 "status",
		"/api/v1/ledger/transits?address=" + signerA:          "chain_id",
		"/api/v1/ledger/transits?chain_id=31337":              "address",
		transitsPath(signerA, "&cursor=bm90LWEtY3Vyc29y"):     "cursor",
		transitsPath(signerA, "&limit=0"):                     "limit",
		"/api/v1/ledger/transits/" + strings.Repeat("x", 129): "transit_id",
		"/api/v1/ledger/transits/a%20b":                       "transit_id",
	} {
		resp, body := g.Do(t, g.Acme, "GET", path, "")
		p := decode[problem](t, body)
		named := slices.ContainsFunc(p.Errors, func(e struct{ Pointer, Detail string }) bool { return e.Pointer == pointer })
		if resp.StatusCode != http.StatusBadRequest || p.Type != "urn:txfence:problem:invalid" || !named {
			t.Errorf("GET %s: %d %s, want a 400 problem naming %q", path, resp.StatusCode, body, pointer)
		}
	}
	bare := gatewaystack.Start(t, gatewaystack.Options{})
	if resp, body := bare.Do(t, bare.Acme, "GET", transitsPath(signerA), ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("no ledger: %d %s, want 503", resp.StatusCode, body)
	}
}

// Transit ids are per tenant: globex naming the id acme uses, before and
// after acme's transactions, neither takes acme's transfer nor joins it;
// each tenant reads its own transfer under the id it gave, and its
// transactions' INIT events name its own namespace, never another's.
func TestTransitIDsArePerTenant(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true})
	// create answers the new transaction's id.
	create := func(key, signer, idem, dependsOn string) string {
		t.Helper()
		body := strings.Replace(gatewaystack.Transfer(signer, "1"), `"metadata": {`, `"metadata": {"transit_id": "move-1", `, 1)
		if dependsOn != "" {
			body = strings.Replace(body, `"route"`, `"depends_on": "`+dependsOn+`", "route"`, 1)
		}
		resp, b := g.Do(t, key, "POST", "/api/v1/tx", body, "Idempotency-Key", idem)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d %s", idem, resp.StatusCode, b)
		}
		return decode[components.Tx](t, b).TxId.String()
	}
	squat := create(g.Globex, signerB, "squat", "")
	source := create(g.Acme, signerA, "source", "")
	destination := create(g.Acme, signerA, "destination", source)
	late := create(g.Globex, signerB, "late", "")
	g.Consume(t)

	mine := read[gatewayapi.LedgerTransit](t, g, g.Acme, "/api/v1/ledger/transits/move-1")
	if mine.TransitId != "move-1" || mine.Source.TxId != source || mine.Destination == nil || mine.Destination.TxId != destination {
		t.Errorf("acme's move-1: %+v", mine)
	}
	_, raw := g.Do(t, g.Globex, "GET", "/api/v1/ledger/transits/move-1", "")
	theirs := decode[gatewayapi.LedgerTransit](t, raw)
	if theirs.TransitId != "move-1" || theirs.Source.TxId != squat || theirs.Destination != nil || strings.Contains(string(raw), source) ||
		strings.Contains(string(raw), g.AcmeTenant.ID.String()) || strings.Contains(string(raw), g.GlobexTenant.ID.String()) {
		t.Errorf("globex's move-1: %s", raw)
	}
	for key, tenant := range map[string]string{g.Acme: g.AcmeTenant.ID.String(), g.Globex: g.GlobexTenant.ID.String()} {
		list := read[gatewayapi.LedgerTransitList](t, g, key, transitsPath(map[string]string{g.Acme: signerA, g.Globex: signerB}[key]))
		if len(list.Transits) != 1 || list.Transits[0].TransitId != "move-1" {
			t.Errorf("the transits of %s's signer: %+v", tenant, list)
		}
	}
	// The events name the tenant's own namespace beside the client's id.
	for key, want := range map[string]map[string]string{
		g.Acme:   {source: g.AcmeTenant.ID.String(), destination: g.AcmeTenant.ID.String()},
		g.Globex: {squat: g.GlobexTenant.ID.String(), late: g.GlobexTenant.ID.String()},
	} {
		for id, ns := range want {
			_, b := g.Do(t, key, "GET", "/api/v1/tx/"+id+"/events", "")
			if !strings.Contains(string(b), `"transit_namespace":"`+ns+`"`) || !strings.Contains(string(b), `"transit_id":"move-1"`) {
				t.Errorf("the INIT event of %s: %s, want namespace %s", id, b, ns)
			}
		}
	}
}
