package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/openapi/components"
)

// withParents is a transfer from signer whose depends_on is raw JSON.
func withParents(signer, raw string) string {
	return strings.Replace(transfer(signer, "1"), `"route"`, `"depends_on": `+raw+`, "route"`, 1)
}

// TestDependsOnShapes: depends_on is an array of the tenant's transactions
// or one bare id (read as an array of one); the transaction answers the
// array either way. Every bad shape, a repeat, more than 16 and another
// tenant's transaction are a 400 problem naming the element at fault.
func TestDependsOnShapes(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	p, q := r.Create(t, r.Acme, signerA, "p").TxID, r.Create(t, r.Acme, signerA, "q").TxID
	theirs := r.Create(t, r.Globex, signerB, "theirs").TxID
	for name, tc := range map[string]struct {
		raw  string
		want []string
	}{
		"an array":  {`["` + q + `", "` + p + `"]`, []string{q, p}},
		"a bare id": {`"` + p + `"`, []string{p}},
	} {
		resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx", withParents(signerA, tc.raw), "Idempotency-Key", "child-"+strings.ReplaceAll(name, " ", "-"))
		got := decode[components.Tx](t, b)
		var ids []string
		if got.DependsOn != nil {
			for _, id := range *got.DependsOn {
				ids = append(ids, id.String())
			}
		}
		if resp.StatusCode != http.StatusCreated || !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %d %s, want 201 with depends_on %v", name, resp.StatusCode, b, tc.want)
		}
	}

	unknown := "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7"
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = `"` + r.Create(t, r.Acme, signerA, "many-"+string(rune('a'+i))).TxID + `"`
	}
	for name, tc := range map[string]struct{ raw, pointer string }{
		"a repeat":                  {`["` + p + `", "` + q + `", "` + p + `"]`, "/depends_on/2"},
		"another tenant's":          {`["` + p + `", "` + theirs + `"]`, "/depends_on/1"},
		"another tenant's, bare":    {`"` + theirs + `"`, "/depends_on/0"},
		"an unknown one":            {`["` + q + `", "` + p + `", "` + unknown + `"]`, "/depends_on/2"},
		"a malformed one":           {`["` + p + `", "not-a-uuid"]`, "/depends_on/1"},
		"a number":                  {`["` + p + `", 7]`, "/depends_on/1"},
		"an empty array":            {`[]`, "/depends_on"},
		"seventeen":                 {"[" + strings.Join(seventeen, ", ") + "]", "/depends_on"},
		"an object":                 {`{"tx_id": "` + p + `"}`, "/depends_on"},
		"a malformed bare id":       {`"not-a-uuid"`, "/depends_on"},
		"null":                      {`null`, "/depends_on"},
		"an array of arrays":        {`[["` + p + `"]]`, "/depends_on/0"},
		"a bare id without hyphens": {`"` + strings.ReplaceAll(p, "-", "") + `"`, "/depends_on"},
	} {
		resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx", withParents(signerA, tc.raw), "Idempotency-Key", "bad-"+strings.NewReplacer(" ", "-", "'", "").Replace(name))
		pr := decode[problem](t, b)
		var pointers []string
		for _, e := range pr.Errors {
			pointers = append(pointers, e.Pointer)
		}
		if resp.StatusCode != http.StatusBadRequest || pr.Type != "urn:txfence:problem:invalid" || !slices.Contains(pointers, tc.pointer) {
			t.Errorf("%s: %d %s, want a 400 problem naming %s", name, resp.StatusCode, b, tc.pointer)
		}
	}
}
