package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// withParents is a create body of requestID whose depends_on is raw JSON.
func withParents(requestID, raw string) string {
	return strings.Replace(txmanagertest.TransferBody(requestID, "1"), `"route"`, `"depends_on": `+raw+`, "route"`, 1)
}

// TestCreateTakesSeveralParents: depends_on is an array of parents or, as
// clients wrote it before, one bare id; either way the transaction and
// its INIT event give the array. Bad parents are refused, each named by
// its pointer.
func TestCreateTakesSeveralParents(t *testing.T) {
	t.Parallel()
	a := start(t)
	p, q := a.Create(t, "p"), a.Create(t, "q")
	type parentsJSON struct {
		TxID      string   `json:"tx_id"`
		DependsOn []string `json:"depends_on"`
	}
	for name, tc := range map[string]struct {
		raw  string
		want []string
	}{
		"an array":  {`["` + q + `", "` + p + `"]`, []string{q, p}},
		"a bare id": {`"` + p + `"`, []string{p}},
	} {
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", withParents("child "+name, tc.raw))
		got := servicetest.Decode[parentsJSON](t, b)
		if code != http.StatusCreated || !cmp.Equal(got.DependsOn, tc.want) {
			t.Errorf("%s: %d %s, want 201 with depends_on %v", name, code, b, tc.want)
			continue
		}
		_, b = a.Do(t, "gateway", "GET", "/internal/v1/tx/"+got.TxID+"/events", "")
		var events struct {
			Events []struct {
				Data json.RawMessage `json:"data"`
			} `json:"events"`
		}
		if err := json.Unmarshal(b, &events); err != nil || len(events.Events) != 1 {
			t.Fatalf("events of %s: %s %v", got.TxID, b, err)
		}
		if init := servicetest.Decode[parentsJSON](t, events.Events[0].Data); !cmp.Equal(init.DependsOn, tc.want) {
			t.Errorf("%s: the INIT event says %s, want depends_on %v", name, events.Events[0].Data, tc.want)
		}
	}

	unknown := "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7"
	seventeen := `["` + strings.Repeat(p+`", "`, 16) + p + `"]`
	for name, tc := range map[string]struct{ raw, pointer string }{
		"a repeat":           {`["` + p + `", "` + q + `", "` + p + `"]`, "/depends_on/2"},
		"an unknown one":     {`["` + p + `", "` + unknown + `"]`, "/depends_on/1"},
		"a malformed one":    {`["` + p + `", "x"]`, "/depends_on/1"},
		"a number":           {`[7]`, "/depends_on/0"},
		"an empty array":     {`[]`, "/depends_on"},
		"seventeen":          {seventeen, "/depends_on"},
		"an object":          {`{"id": "` + p + `"}`, "/depends_on"},
		"an unknown bare id": {`"` + unknown + `"`, "/depends_on/0"},
	} {
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", withParents("bad "+name, tc.raw))
		var problem struct {
			Type   string
			Errors []struct{ Pointer string }
		}
		if err := json.Unmarshal(b, &problem); err != nil || code != http.StatusBadRequest || problem.Type != "urn:txfence:problem:invalid" ||
			len(problem.Errors) == 0 || problem.Errors[0].Pointer != tc.pointer {
			t.Errorf("%s: %d %s, want a 400 problem naming %s", name, code, b, tc.pointer)
		}
	}
}
