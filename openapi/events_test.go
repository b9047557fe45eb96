package openapi_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/components"
)

// TestExamplesValidate validates every example in components.yaml (schema
// examples, the webhook payloads among them, and response examples)
// against the schema it illustrates.
func TestExamplesValidate(t *testing.T) {
	doc, err := openapi.Load(t.Context(), openapi.Components)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		s := doc.Components.Schemas[name].Value
		if s.Example == nil {
			continue
		}
		n++
		if err := s.VisitJSON(s.Example); err != nil {
			t.Errorf("schema %s: its example does not validate: %v", name, err)
		}
	}
	for name, resp := range doc.Components.Responses {
		for mediaType, mt := range resp.Value.Content {
			if mt.Example == nil {
				continue
			}
			n++
			if err := mt.Schema.Value.VisitJSON(mt.Example); err != nil {
				t.Errorf("response %s %s: its example does not validate: %v", name, mediaType, err)
			}
		}
	}
	if n < 15 {
		t.Errorf("found only %d examples; the walk misses some", n)
	}
}

// typedEvents are the Event envelope with data spelled out, by type, with
// a Go value of the generated type to decode their examples into.
var typedEvents = map[components.EventType]struct {
	schema string
	event  any
	data   any
}{
	components.EventTxStateChanged: {"TxStateChangedEvent", &components.TxStateChangedEvent{}, &components.TxStateChangedData{}},
	components.EventTxAttempt:      {"TxAttemptEvent", &components.TxAttemptEvent{}, &components.TxAttemptData{}},
	components.EventTxConfirmation: {"TxConfirmationEvent", &components.TxConfirmationEvent{}, &components.TxConfirmationData{}},
	components.EventTxReorged:      {"TxReorgedEvent", &components.TxReorgedEvent{}, &components.TxReorgedData{}},
}

// TestEventSchemas checks the webhook payloads: every event type has its
// typed schema, each example is a valid Event envelope and survives the
// generated Go types unchanged (no member the types lack, none they add).
func TestEventSchemas(t *testing.T) {
	schemas := componentSchemas(t)

	var types []components.EventType
	for _, v := range schemas["EventType"].Value.Enum {
		types = append(types, components.EventType(v.(string)))
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(typedEvents)), slices.Sorted(slices.Values(types))); diff != "" {
		t.Errorf("event types with a typed schema differ from the EventType enum (-typed +enum):\n%s", diff)
	}

	envelope := schemas["Event"].Value
	for typ, te := range typedEvents {
		s := schemas[te.schema].Value
		if got := s.Properties["type"].Value.Enum; len(got) != 1 || got[0] != string(typ) {
			t.Errorf("%s: type enum %v, want [%s]", te.schema, got, typ)
		}
		if diff := cmp.Diff(slices.Sorted(maps.Keys(envelope.Properties)), slices.Sorted(maps.Keys(s.Properties))); diff != "" {
			t.Errorf("%s: members differ from the Event envelope's (-Event +%s):\n%s", te.schema, te.schema, diff)
		}
		if s.Example == nil {
			t.Errorf("%s has no example", te.schema)
			continue
		}
		if err := envelope.VisitJSON(s.Example); err != nil {
			t.Errorf("%s: its example is not a valid Event: %v", te.schema, err)
		}
		raw, err := json.Marshal(s.Example)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, te.schema, raw, te.event)

		var ev components.Event
		if err := strictUnmarshal(raw, &ev); err != nil {
			t.Errorf("%s: the example does not decode as an Event: %v", te.schema, err)
			continue
		}
		if ev.Type != typ {
			t.Errorf("%s: Event.Type %q", te.schema, ev.Type)
		}
		roundTrip(t, te.schema+".data", ev.Data, te.data)
	}
}

// roundTrip decodes raw into v, refusing unknown members, encodes it again
// and compares the two JSON documents.
func roundTrip(t *testing.T, where string, raw []byte, v any) {
	t.Helper()
	if err := strictUnmarshal(raw, v); err != nil {
		t.Errorf("%s: the example does not decode into %T: %v", where, v, err)
		return
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal(raw, &want)
	_ = json.Unmarshal(again, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: the example changes through %T (-example +re-encoded):\n%s", where, v, diff)
	}
}

func strictUnmarshal(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// TestStateMachineNames holds the state and sub-state enums to the design
// (SYSTEM.md section 3), and the generated constants to the enums.
func TestStateMachineNames(t *testing.T) {
	schemas := componentSchemas(t)
	for _, tc := range []struct {
		schema string
		want   []string
		valid  func(string) bool
	}{
		{"TxState", []string{"INIT", "SIMULATED", "PENDING_APPROVAL", "ALLOCATED", "SIGNED", "BROADCASTED", "CONFIRMED", "REVERTED", "FAILED", "CANCELLED"},
			func(s string) bool { return components.TxState(s).Valid() }},
		{"TxSubState", []string{"waiting_dependency", "insufficient_funds", "included", "stuck", "stale", "replaced"},
			func(s string) bool { return components.TxSubState(s).Valid() }},
		{"Route", []string{"public", "private", "auto"},
			func(s string) bool { return components.Route(s).Valid() }},
	} {
		var got []string
		for _, v := range schemas[tc.schema].Value.Enum {
			got = append(got, v.(string))
			if !tc.valid(v.(string)) {
				t.Errorf("%s: the generated type does not accept %q", tc.schema, v)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s enum (-design +spec):\n%s", tc.schema, diff)
		}
		// Every value is documented in the schema's description.
		for _, v := range tc.want {
			if tc.schema != "Route" && !strings.Contains(schemas[tc.schema].Value.Description, "- "+v+":") {
				t.Errorf("%s: %s is not described", tc.schema, v)
			}
		}
	}
}

// TestScalarPatterns pins what the chain scalar schemas accept.
func TestScalarPatterns(t *testing.T) {
	schemas := componentSchemas(t)
	const max256 = "115792089237316195423570985008687907853269984665640564039457584007913129639935" // 2^256-1
	for _, tc := range []struct {
		schema string
		ok     []any
		bad    []any
	}{
		{"Uint256",
			[]any{"0", "1", "1000000000000000000", max256, strings.Repeat("9", 78)},
			[]any{"", "01", "-1", "+1", "1e18", "1.5", " 1", "0x10", strings.Repeat("9", 79), 1.0}},
		{"Address",
			[]any{"0x5FbDB2315678afecb367f032d93F642f64180aa3", "0x" + strings.Repeat("0", 40)},
			[]any{"5FbDB2315678afecb367f032d93F642f64180aa3", "0x5FbDB2315678afecb367f032d93F642f64180aa", "0x" + strings.Repeat("g", 40), "0x" + strings.Repeat("0", 41)}},
		{"Hash",
			[]any{"0x" + strings.Repeat("ab", 32)},
			[]any{"0x" + strings.Repeat("ab", 31), "0x" + strings.Repeat("ab", 33), strings.Repeat("ab", 32)}},
		{"HexData",
			[]any{"0x", "0xa9059cbb", "0xABCDEF"},
			[]any{"", "0x1", "0xabc", "a9059cbb", "0xzz"}},
		{"ChainId",
			[]any{1.0, 31337.0, 11155111.0},
			[]any{0.0, -1.0, 1.5, "1"}},
	} {
		s := schemas[tc.schema].Value
		for _, v := range tc.ok {
			if err := s.VisitJSON(v); err != nil {
				t.Errorf("%s rejects %v: %v", tc.schema, v, err)
			}
		}
		for _, v := range tc.bad {
			if err := s.VisitJSON(v); err == nil {
				t.Errorf("%s accepts %v", tc.schema, v)
			}
		}
	}
	if !strings.Contains(schemas["Uint256"].Value.Description, "2^256") {
		t.Error("the Uint256 description does not say values are range-checked below 2^256")
	}
}

// TestPagination pins the shared list parameters.
func TestPagination(t *testing.T) {
	doc, err := openapi.Load(t.Context(), openapi.Components)
	if err != nil {
		t.Fatal(err)
	}
	limit := doc.Components.Parameters["Limit"].Value
	ls := limit.Schema.Value
	if limit.In != openapi3.ParameterInQuery || limit.Name != "limit" || ls.Min == nil || *ls.Min != 1 || ls.Max == nil || *ls.Max != 1000 || ls.Default != 100.0 {
		t.Errorf("limit parameter: %+v %+v", limit, ls)
	}
	cursor := doc.Components.Parameters["Cursor"].Value
	if cursor.In != openapi3.ParameterInQuery || cursor.Name != "cursor" || cursor.Required {
		t.Errorf("cursor parameter: %+v", cursor)
	}
	next := doc.Components.Schemas["Page"].Value.Properties["next_cursor"].Value
	if !next.Nullable {
		t.Error("next_cursor is not nullable")
	}
}
