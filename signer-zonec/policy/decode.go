package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is one thing wrong with a policy file, at a JSON path such as
// rules[2].limits.max_gas ("$" is the whole file).
type Problem struct {
	Path string
	Msg  string
}

func (p Problem) String() string { return p.Path + ": " + p.Msg }

// Error is a policy file (or, from DecodeStrict, another JSON file) that
// was refused, with every problem found.
type Error struct {
	Problems []Problem
	// json is set for DecodeStrict's errors, which may not be about a
	// policy at all.
	json bool
}

func (e *Error) Error() string {
	what := "invalid policy"
	if e.json {
		what = "invalid JSON"
	}
	if len(e.Problems) == 1 {
		return what + ": " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", what, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// decode reads data into a rawPolicy, strictly.
func decode(data []byte) (rawPolicy, error) {
	var raw rawPolicy
	err := DecodeStrict(data, &raw)
	if e, ok := err.(*Error); ok {
		e.json = false
	}
	return raw, err
}

// DecodeStrict decodes one JSON object into v (a pointer to a struct whose
// fields are strings, bools, uint64s, pointers to those, slices, maps with
// string keys and such structs), as strictly as Parse reads a policy file,
// for any file a person reads before signerd or a signing tool acts on it.
// A problem comes back as an *Error naming its path.
//
// encoding/json alone is not strict enough for a file whose reader must see
// what is enforced: it matches field names case-insensitively, keeps the
// last of duplicate keys (so {"effect":"deny","effect":"allow"} would read
// as a deny and be an allow), accepts null for anything and says little
// about where a problem is. So a first pass walks the tokens against v's
// type and refuses all of that, plus invalid UTF-8 and trailing data; only
// then does encoding/json fill v, which can no longer surprise.
func DecodeStrict(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("policy.DecodeStrict: want a pointer to a struct, got %T", v)
	}
	if !utf8.Valid(data) {
		return &Error{json: true, Problems: []Problem{{Path: "$", Msg: "not valid UTF-8"}}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, data: data}
	if err := w.value(t.Elem(), "$"); err != nil {
		return &Error{json: true, Problems: []Problem{*err}}
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return &Error{json: true, Problems: []Problem{{Path: "$", Msg: "data after the object (" + w.where(int64(len(data)-len(rest))) + ")"}}}
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		// The walk above accepts only what decodes; this is a bug if seen.
		return &Error{json: true, Problems: []Problem{{Path: "$", Msg: err.Error()}}}
	}
	return nil
}

// walker checks a JSON token stream against a Go type's shape.
type walker struct {
	dec  *json.Decoder
	data []byte
}

// where describes a byte offset as a line and column.
func (w *walker) where(off int64) string {
	if off > int64(len(w.data)) {
		off = int64(len(w.data))
	}
	before := w.data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

func (w *walker) token(path string) (json.Token, *Problem) {
	tok, err := w.dec.Token()
	if err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, &Problem{path, fmt.Sprintf("invalid JSON at %s: %v", w.where(syn.Offset), err)}
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &Problem{path, "unexpected end of file"}
		default:
			return nil, &Problem{path, fmt.Sprintf("invalid JSON at %s: %v", w.where(w.dec.InputOffset()), err)}
		}
	}
	return tok, nil
}

// jsonKind names what a JSON token is, for messages.
func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// value checks the next JSON value against t.
func (w *walker) value(t reflect.Type, path string) *Problem {
	tok, p := w.token(path)
	if p != nil {
		return p
	}
	if tok == nil {
		return &Problem{path, "null is not allowed; leave the field out instead"}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if tok != json.Delim('{') {
			return &Problem{path, "want an object, got " + jsonKind(tok)}
		}
		return w.object(path, func(key, kpath string) *Problem {
			f, ok := fieldByTag(t, key)
			if !ok {
				if g, ok := fieldByFold(t, key); ok {
					return &Problem{kpath, fmt.Sprintf("unknown field %q (did you mean %q? names are case-sensitive)", key, g)}
				}
				return &Problem{kpath, fmt.Sprintf("unknown field %q", key)}
			}
			return w.value(f.Type, kpath)
		})
	case reflect.Map:
		if tok != json.Delim('{') {
			return &Problem{path, "want an object, got " + jsonKind(tok)}
		}
		return w.object(path, func(_, kpath string) *Problem { return w.value(t.Elem(), kpath) })
	case reflect.Slice:
		if tok != json.Delim('[') {
			return &Problem{path, "want an array, got " + jsonKind(tok)}
		}
		for i := 0; w.dec.More(); i++ {
			if p := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != nil {
				return p
			}
		}
		_, p := w.token(path) // ']'
		return p
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return &Problem{path, "want a string, got " + jsonKind(tok)}
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return &Problem{path, "want true or false, got " + jsonKind(tok)}
		}
	case reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return &Problem{path, "want a number, got " + jsonKind(tok)}
		}
		if _, err := strconv.ParseUint(string(n), 10, 64); err != nil {
			return &Problem{path, fmt.Sprintf("%s is not a whole number from 0 to 2^64-1", n)}
		}
	default:
		return &Problem{path, "internal error: no schema for " + t.String()}
	}
	return nil
}

// object walks an object's members (after its '{'), refusing duplicate
// keys, including keys that differ only in case: a reader would take them
// for one.
func (w *walker) object(path string, member func(key, kpath string) *Problem) *Problem {
	seen := map[string]string{}
	for w.dec.More() {
		tok, p := w.token(path)
		if p != nil {
			return p
		}
		key := tok.(string) // the decoder guarantees object keys are strings
		kpath := childPath(path, key)
		folded := strings.ToLower(key)
		if prev, dup := seen[folded]; dup {
			if prev == key {
				return &Problem{kpath, "duplicate key"}
			}
			return &Problem{kpath, fmt.Sprintf("duplicate key (%q differs only in case)", prev)}
		}
		seen[folded] = key
		if p := member(key, kpath); p != nil {
			return p
		}
	}
	_, p := w.token(path) // '}'
	return p
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_*-][A-Za-z0-9_.*-]*$`)

// childPath is path.key, or path["key"] when the key needs quoting.
func childPath(path, key string) string {
	if path == "$" {
		path = ""
	}
	if plainKey.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if jsonName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldByFold(t reflect.Type, key string) (string, bool) {
	for f := range t.Fields() {
		if strings.EqualFold(jsonName(f), key) {
			return jsonName(f), true
		}
	}
	return "", false
}
