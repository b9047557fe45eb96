package openapi_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/shared/errs"
)

func componentSchemas(t *testing.T) openapi3.Schemas {
	t.Helper()
	doc, err := openapi.Load(t.Context(), openapi.Components)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas
}

// jsonFields lists the JSON member names of struct type v, and which of
// them are always present (no omitempty).
func jsonFields(v any) (names, always []string) {
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	slices.Sort(names)
	slices.Sort(always)
	return names, always
}

func schemaFields(s *openapi3.Schema) (names, required []string) {
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	required = slices.Sorted(slices.Values(s.Required))
	return names, required
}

// TestProblemSchemaDescribesErrs holds the Problem and FieldError schemas
// to the Go types errs writes: the same members, required exactly when
// errs always writes them.
func TestProblemSchemaDescribesErrs(t *testing.T) {
	schemas := componentSchemas(t)
	for _, tc := range []struct {
		schema string
		goType any
	}{
		{"Problem", errs.Problem{}},
		{"FieldError", errs.FieldError{}},
	} {
		wantNames, wantAlways := jsonFields(tc.goType)
		gotNames, gotRequired := schemaFields(schemas[tc.schema].Value)
		if diff := cmp.Diff(wantNames, gotNames); diff != "" {
			t.Errorf("%s properties differ from %T's JSON fields (-errs +spec):\n%s", tc.schema, tc.goType, diff)
		}
		if diff := cmp.Diff(wantAlways, gotRequired); diff != "" {
			t.Errorf("%s required differs from %T's fields without omitempty (-errs +spec):\n%s", tc.schema, tc.goType, diff)
		}
	}
}

// TestProblemTypesAreTheKinds holds the ProblemType enum, its generated
// constants and the kind table in the Problem description to errs.Kinds.
func TestProblemTypesAreTheKinds(t *testing.T) {
	schemas := componentSchemas(t)

	var want, got []string
	for _, k := range errs.Kinds {
		want = append(want, "urn:txfence:problem:"+k.String())
	}
	for _, v := range schemas["ProblemType"].Value.Enum {
		got = append(got, v.(string))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ProblemType enum differs from errs.Kinds (-errs +spec):\n%s", diff)
	}

	constants := map[errs.Kind]components.ProblemType{
		errs.Internal:     components.ProblemInternal,
		errs.Invalid:      components.ProblemInvalid,
		errs.NotFound:     components.ProblemNotFound,
		errs.Conflict:     components.ProblemConflict,
		errs.Unauthorized: components.ProblemUnauthorized,
		errs.Forbidden:    components.ProblemForbidden,
		errs.Unavailable:  components.ProblemUnavailable,
		errs.RateLimited:  components.ProblemRateLimited,
	}
	if len(constants) != len(errs.Kinds) {
		t.Errorf("the test maps %d kinds, errs has %d", len(constants), len(errs.Kinds))
	}
	for _, k := range errs.Kinds {
		if got, want := constants[k], components.ProblemType(errs.ProblemFor(errs.E(k, "x")).Type); got != want {
			t.Errorf("kind %s: generated constant %q, errs writes %q", k, got, want)
		}
		if !constants[k].Valid() {
			t.Errorf("kind %s: %q is not a valid ProblemType", k, constants[k])
		}
	}

	// The description's table: | kind | status | meaning |
	row := regexp.MustCompile(`(?m)^\| ([a-z_]+) \| ([0-9]{3}) \|`)
	table := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(schemas["Problem"].Value.Description, -1) {
		table[m[1]], _ = strconv.Atoi(m[2])
	}
	wantTable := map[string]int{}
	for _, k := range errs.Kinds {
		wantTable[k.String()] = k.HTTPStatus()
	}
	if diff := cmp.Diff(wantTable, table); diff != "" {
		t.Errorf("the kind table in the Problem description differs from errs (-errs +spec):\n%s", diff)
	}
}

// TestProblemsValidate validates what errs writes for every kind against
// the Problem schema.
func TestProblemsValidate(t *testing.T) {
	schema := componentSchemas(t)["Problem"].Value
	errors := []error{
		errs.InvalidFields("the request breaks 2 rules",
			errs.FieldError{Pointer: "/value", Detail: "must be a decimal integer below 2^256"},
			errs.FieldError{Pointer: "Idempotency-Key", Detail: "required"}),
		errs.Wrap(errs.Internal, "store", errs.E(errs.Unavailable, "secret cause")),
	}
	for _, k := range errs.Kinds {
		errors = append(errors, errs.E(k, "something about "+k.String()))
	}
	for _, err := range errors {
		p := errs.ProblemFor(err)
		p.Instance = "/readyz"
		p.RequestID = "6f1c2d9a0b3e4f5a6b7c8d9e0f1a2b3c"
		var doc any
		body, _ := json.Marshal(p)
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if verr := schema.VisitJSON(doc); verr != nil {
			t.Errorf("%s: %v", body, verr)
		}
	}
}
