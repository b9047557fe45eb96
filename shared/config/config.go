// Package config fills one typed struct per service from environment
// variables, validates it, and dumps it for the start-up log with secrets
// masked. Only a service's cmd/run reads the environment; everything below
// it receives the typed struct.
//
// Fields are bound with struct tags:
//
//	DatabaseURL string        `env:"DATABASE_URL" required:"true" secret:"true"`
//	Renew       time.Duration `env:"LEASE_RENEW" default:"3s" usage:"how often leases are renewed"`
//	TLS         TLSFiles      `envprefix:"TLS_"`
//
// A field tagged devswitch:"true" is a development and test switch
// (package devswitch): a release build refuses it when it is set to
// anything but its zero value.
//
// Nested structs add their envprefix to their fields' names; embedded
// structs without one share the parent's prefix. Supported field types are
// string, Secret, bool, the integer and float kinds, time.Duration,
// []string (comma-separated) and anything implementing
// encoding.TextUnmarshaler. After loading, Validate() is called on every
// struct that has it.
package config

import (
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/txfence/txfence/shared/devswitch"
)

// Secret is a string that never shows in logs or dumps.
type Secret string

// String hides the value from fmt.
func (Secret) String() string { return "[redacted]" }

// LogValue hides the value from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Reveal returns the secret value, for the one place that needs it.
func (s Secret) Reveal() string { return string(s) }

// Validator is implemented by config structs that check themselves after
// loading (cross-field rules, ranges).
type Validator interface {
	Validate() error
}

var (
	durationType   = reflect.TypeFor[time.Duration]()
	secretType     = reflect.TypeFor[Secret]()
	unmarshalerPtr = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Load fills the struct cfg points to from variables named prefix+tag, as
// getenv returns them. It reports every problem at once, each naming the
// variable, so an operator fixes the environment in one go.
func Load(prefix string, getenv func(string) string, cfg any) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config.Load needs a pointer to a struct, got %T", cfg)
	}
	var problems []error
	load(prefix, getenv, v.Elem(), &problems)
	if len(problems) == 0 {
		validate(v.Elem(), &problems)
	}
	return errors.Join(dedupe(problems)...)
}

// field is one variable-bound field met by walk.
type field struct {
	key    string // the variable's full name
	tag    reflect.StructTag
	value  reflect.Value
	secret bool
}

// walk calls fn for every variable-bound field of the struct v, in order,
// descending into nested structs (adding their envprefix) and embedded ones.
func walk(prefix string, v reflect.Value, fn func(field)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		fv := v.Field(i)
		name, tagged := f.Tag.Lookup("env")
		if !tagged {
			if fv.Kind() == reflect.Struct && !isScalar(fv) {
				walk(prefix+f.Tag.Get("envprefix"), fv, fn)
			}
			continue
		}
		fn(field{key: prefix + name, tag: f.Tag, value: fv, secret: f.Tag.Get("secret") == "true" || fv.Type() == secretType})
	}
}

func load(prefix string, getenv func(string) string, v reflect.Value, problems *[]error) {
	walk(prefix, v, func(f field) {
		raw := getenv(f.key)
		if raw == "" {
			raw = f.tag.Get("default")
		}
		if raw == "" {
			if f.tag.Get("required") == "true" {
				*problems = append(*problems, fmt.Errorf("%s is required", f.key))
			}
			return
		}
		if err := set(f.value, raw); err != nil {
			shown := raw
			if f.secret {
				shown = "[redacted]"
			}
			*problems = append(*problems, fmt.Errorf("%s=%q: %w", f.key, shown, err))
			return
		}
		if f.tag.Get("devswitch") == "true" && !devswitch.Enabled && !f.value.IsZero() {
			f.value.SetZero()
			*problems = append(*problems, devswitch.Refused(f.key))
		}
	})
}

func validate(v reflect.Value, problems *[]error) {
	for i := range v.NumField() {
		if sf := v.Type().Field(i); (sf.IsExported() || sf.Anonymous) && sf.Type.Kind() == reflect.Struct {
			validate(v.Field(i), problems)
		}
	}
	// The pointer's method set holds both value and pointer receivers.
	if p := v.Addr(); p.CanInterface() {
		if val, ok := p.Interface().(Validator); ok {
			if err := val.Validate(); err != nil {
				*problems = append(*problems, err)
			}
		}
	}
}

// dedupe drops repeated problems: a Validate method promoted from an
// embedded struct is reached both through the embedded field and through
// the outer struct.
func dedupe(problems []error) []error {
	seen := map[string]bool{}
	var out []error
	for _, p := range problems {
		if !seen[p.Error()] {
			seen[p.Error()] = true
			out = append(out, p)
		}
	}
	return out
}

// isScalar reports whether a struct-kinded field is set from one variable
// (it implements TextUnmarshaler) rather than holding nested fields.
func isScalar(v reflect.Value) bool {
	return reflect.PointerTo(v.Type()).Implements(unmarshalerPtr)
}

func set(v reflect.Value, raw string) error {
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerPtr) {
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(raw))
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("not a boolean (use true or false)")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(raw, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an integer of %d bits", v.Type().Bits())
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(raw, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an unsigned integer of %d bits", v.Type().Bits())
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(raw, v.Type().Bits())
		if err != nil {
			return errors.New("not a number")
		}
		v.SetFloat(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported list type %s", v.Type())
		}
		var items []string
		for item := range strings.SplitSeq(raw, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.Set(reflect.ValueOf(items).Convert(v.Type()))
	default:
		return fmt.Errorf("unsupported config field type %s", v.Type())
	}
	return nil
}

// Dump returns cfg as log attributes keyed by variable name, with secret
// fields and URL passwords masked, for the one start-up line that tells an
// operator what the service is running with.
func Dump(prefix string, cfg any) []slog.Attr {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	var attrs []slog.Attr
	dump(prefix, v, &attrs)
	return attrs
}

func dump(prefix string, v reflect.Value, attrs *[]slog.Attr) {
	walk(prefix, v, func(f field) {
		shown := MaskURL(fmt.Sprint(f.value.Interface()))
		if f.secret {
			shown = ""
			if !f.value.IsZero() {
				shown = "[redacted]"
			}
		}
		*attrs = append(*attrs, slog.String(f.key, shown))
	})
}

// MaskURL hides the password of a URL-shaped value (database and Redis
// URLs carry them), leaving the rest readable.
func MaskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}
