package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// validator checks each request against openapi/gateway.yaml before a
// handler sees it, and answers a request that breaks the spec with a 400
// problem naming every failing field.
type validator struct {
	router  routers.Router
	options *openapi3filter.Options
}

func newValidator(ctx context.Context) (*validator, error) {
	doc, err := openapi.Load(ctx, openapi.Gateway)
	if err != nil {
		return nil, err
	}
	// The spec's servers name the development stack; requests reach the
	// gateway under any host.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	// authenticate has checked the key already: without the security
	// requirements, validation does not walk them on every request.
	doc.Security = nil
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			op.Security = nil
		}
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the gateway spec: %w", err)
	}
	return &validator{router: router, options: &openapi3filter.Options{
		MultiError: true,
		// Defaults are the handlers' business; the body stays as sent.
		SkipSettingDefaults: true,
	}}, nil
}

func (v *validator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := v.router.FindRoute(r)
		if err != nil {
			// chi answers an unknown route or method; the spec and the
			// routes are kept equal by the tests.
			next.ServeHTTP(w, r)
			return
		}
		err = openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route, Options: v.options,
		})
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				httpserver.Error(w, r, errs.Errorf(errs.Invalid, "the request body is larger than %d bytes", tooBig.Limit))
				return
			}
			fields := fieldErrors(err)
			msg := "the request does not follow the API: " + fields[0].Pointer + ": " + fields[0].Detail
			if len(fields) > 1 {
				msg += fmt.Sprintf(" (and %d more)", len(fields)-1)
			}
			httpserver.Error(w, r, errs.InvalidFields(msg, fields...))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fieldErrors names each failing input of a validation error: a JSON
// pointer into the body, or a parameter's name.
func fieldErrors(err error) []errs.FieldError {
	var out []errs.FieldError
	var walk func(err error, param string, inBody bool)
	walk = func(err error, param string, inBody bool) {
		// The concrete type at each level decides: a RequestError unwraps
		// to a MultiError, so errors.As would skip the level that names
		// the parameter or the body.
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, inner := range e {
				walk(inner, param, inBody)
			}
		case *openapi3filter.RequestError:
			switch {
			case e.Parameter != nil:
				param = e.Parameter.Name
			case e.RequestBody != nil:
				inBody = true
			}
			switch e.Err.(type) {
			case nil:
				out = append(out, errs.FieldError{Pointer: pointer(param, inBody, nil), Detail: e.Reason})
			case openapi3.MultiError, *openapi3.SchemaError:
				walk(e.Err, param, inBody)
			default:
				detail := e.Err.Error()
				if e.Reason != "" {
					detail = e.Reason + ": " + detail
				}
				out = append(out, errs.FieldError{Pointer: pointer(param, inBody, nil), Detail: detail})
			}
		case *openapi3.SchemaError:
			if branches := failedBranches(e); len(branches) > 0 {
				for _, b := range branches {
					walk(b, param, inBody)
				}
				return
			}
			path := e.JSONPointer()
			// An unknown member is reported on its object; point at the
			// member itself.
			if m := unsupportedProperty.FindStringSubmatch(e.Reason); m != nil {
				path = append(path, m[1])
			}
			out = append(out, errs.FieldError{Pointer: pointer(param, inBody, path), Detail: e.Reason})
		default:
			out = append(out, errs.FieldError{Pointer: pointer(param, inBody, nil), Detail: err.Error()})
		}
	}
	walk(err, "", false)
	if len(out) == 0 {
		out = append(out, errs.FieldError{Pointer: "request", Detail: err.Error()})
	}
	return out
}

var unsupportedProperty = regexp.MustCompile(`^property "(.+)" is unsupported$`)

// failedBranches are the errors of the branches of an allOf or a oneOf
// that e reports failing, when they name the member at fault better than
// "doesn't match all schemas": every failing branch of an allOf, and of a
// oneOf whose branches take values of different JSON types the one of
// the value's type (depends_on's array names its bad element,
// /depends_on/1, where the oneOf names only depends_on). nil otherwise.
func failedBranches(e *openapi3.SchemaError) []error {
	var branches openapi3.MultiError
	if (e.SchemaField != "allOf" && e.SchemaField != "oneOf") || e.Schema == nil || !errors.As(e.Origin, &branches) {
		return nil
	}
	if e.SchemaField == "allOf" {
		return branches
	}
	if len(branches) != len(e.Schema.OneOf) {
		return nil // a discriminator skipped some: no telling which is which
	}
	kind := jsonType(e.Value)
	match := -1
	for i, ref := range e.Schema.OneOf {
		if ref.Value == nil || !ref.Value.Type.Includes(kind) {
			continue
		}
		if match >= 0 {
			return nil
		}
		match = i
	}
	if match < 0 {
		return nil
	}
	return branches[match : match+1]
}

// jsonType is the JSON Schema type of a value decoded from JSON.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return openapi3.TypeString
	case bool:
		return openapi3.TypeBoolean
	case []any:
		return openapi3.TypeArray
	case map[string]any:
		return openapi3.TypeObject
	case nil:
		return openapi3.TypeNull
	default:
		return openapi3.TypeNumber
	}
}

// pointer is a JSON pointer into the body, or a parameter's name.
func pointer(param string, inBody bool, path []string) string {
	if !inBody {
		if param == "" {
			return "request"
		}
		return param
	}
	if len(path) == 0 {
		return "request body"
	}
	escaped := make([]string, len(path))
	for i, p := range path {
		escaped[i] = strings.NewReplacer("~", "~0", "/", "~1").Replace(p)
	}
	return "/" + strings.Join(escaped, "/")
}
