package dependson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
)

const (
	a = "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7"
	b = "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a8"
)

// body is a request holding depends_on as raw.
type body struct {
	DependsOn dependson.List `json:"depends_on,omitempty"`
}

// TestTheJSONForms: a bare id and an array read alike, null and absence
// are no parent, and everything else is refused naming the member or the
// element at fault.
func TestTheJSONForms(t *testing.T) {
	t.Parallel()
	ids := func(s ...string) dependson.List {
		var out dependson.List
		for _, id := range s {
			out = append(out, uuid.MustParse(id))
		}
		return out
	}
	for raw, want := range map[string]dependson.List{
		`"` + a + `"`:                    ids(a),
		`["` + a + `"]`:                  ids(a),
		` [ "` + b + `" , "` + a + `" ]`: ids(b, a),
		`null`:                           nil,
		`["` + a + `", "` + a + `"]`:     ids(a, a), // the shape is right: Check refuses the repeat
	} {
		var got body
		if err := json.Unmarshal([]byte(`{"depends_on": `+raw+`}`), &got); err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if diff := cmp.Diff(want, got.DependsOn); diff != "" {
			t.Errorf("%s (-want +got):\n%s", raw, diff)
		}
	}
	long := `["` + strings.Repeat(a+`", "`, dependson.Max) + a + `"]`
	for raw, pointer := range map[string]string{
		`[]`:           "/depends_on",
		`"not-a-uuid"`: "/depends_on",
		`"` + strings.ReplaceAll(a, "-", "") + `"`: "/depends_on", // uuid.Parse takes it; the API does not
		`"urn:uuid:` + a + `"`:                     "/depends_on",
		`42`:                                       "/depends_on",
		`{"id": "` + a + `"}`:                      "/depends_on",
		`["` + a + `", 7]`:                         "/depends_on/1",
		`["` + a + `", "` + b + `", "{` + a + `}"]`: "/depends_on/2",
		`["` + a + `", null]`:                       "/depends_on/1",
		long:                                        "/depends_on",
	} {
		var got body
		err := json.Unmarshal([]byte(`{"depends_on": `+raw+`}`), &got)
		var e *errs.Error
		if !errs.Is(err, errs.Invalid) || !asError(err, &e) || len(e.Fields) != 1 || e.Fields[0].Pointer != pointer {
			t.Errorf("%s: %v, want an invalid error naming %s", raw, err, pointer)
		}
	}
	// Every output is the array; no parent is left out.
	for l, want := range map[string]string{"one": `{"depends_on":["` + a + `"]}`, "none": `{}`} {
		v := body{}
		if l == "one" {
			v.DependsOn = ids(a)
		}
		if out, err := json.Marshal(v); err != nil || string(out) != want {
			t.Errorf("%s: %s %v, want %s", l, out, err, want)
		}
	}
}

func asError(err error, target **errs.Error) bool { return errors.As(err, target) }

func TestCheck(t *testing.T) {
	t.Parallel()
	x, y, self := uuid.MustParse(a), uuid.MustParse(b), uuid.New()
	many := make(dependson.List, dependson.Max+1)
	for i := range many {
		many[i] = uuid.New()
	}
	for name, tc := range map[string]struct {
		l    dependson.List
		want []string
	}{
		"none":      {nil, nil},
		"distinct":  {dependson.List{x, y}, nil},
		"max":       {many[:dependson.Max], nil},
		"repeat":    {dependson.List{x, y, x, y}, []string{"/depends_on/2", "/depends_on/3"}},
		"itself":    {dependson.List{x, self}, []string{"/depends_on/1"}},
		"too many":  {many, []string{"/depends_on"}},
		"nil self":  {dependson.List{uuid.Nil}, nil},
		"both ways": {dependson.List{self, self}, []string{"/depends_on/0", "/depends_on/1"}},
	} {
		var got []string
		for _, f := range tc.l.Check(self) {
			got = append(got, f.Pointer)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestSortedIsASetsOneOrder: two orders of one set sort alike, and the
// list sorted is left as it was.
func TestSortedIsASetsOneOrder(t *testing.T) {
	t.Parallel()
	x, y, z := uuid.New(), uuid.New(), uuid.New()
	l := dependson.List{z, x, y}
	if diff := cmp.Diff(dependson.List{y, z, x}.Sorted(), l.Sorted()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dependson.List{z, x, y}, l); diff != "" {
		t.Errorf("Sorted changed its list (-want +got):\n%s", diff)
	}
}

// FuzzUnmarshal: whatever a client sends, reading it either fails as the
// caller's invalid input naming a depends_on pointer, or gives 1 to Max
// ids that write back as an array reading the same.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`"` + a + `"`, `["` + a + `","` + b + `"]`, `[]`, `null`, `"x"`, `[1]`, `[` + `"` + a + `",` + `"` + a + `"]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var l dependson.List
		err := l.UnmarshalJSON([]byte(raw))
		if err != nil {
			var e *errs.Error
			if !asError(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 1 || !strings.HasPrefix(e.Fields[0].Pointer, "/depends_on") {
				t.Fatalf("%q: %#v", raw, err)
			}
			return
		}
		if l == nil {
			return // null
		}
		if len(l) < 1 || len(l) > dependson.Max {
			t.Fatalf("%q: %d ids", raw, len(l))
		}
		out, err := json.Marshal(l)
		if err != nil || out[0] != '[' {
			t.Fatalf("%q: written as %s (%v)", raw, out, err)
		}
		var again dependson.List
		if err := again.UnmarshalJSON(out); err != nil || !cmp.Equal(l, again) {
			t.Fatalf("%q: %s reads back as %v (%v)", raw, out, again, err)
		}
	})
}
