package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/txfence/txfence/shared/errs"
)

// CheckJSON refuses a request whose Content-Type is set to anything but
// JSON (errs.Invalid).
func CheckJSON(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errs.Errorf(errs.Invalid, "content type %q: send application/json", ct)
	}
	return nil
}

// DecodeStrict reads one JSON document from body into v, refusing unknown
// fields and trailing data, so that a request means exactly what its fields
// say. Bound body with http.MaxBytesReader: going over the bound is named
// as such. Every error is errs.Invalid.
func DecodeStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if tooBig := overBound(err); tooBig != nil {
			return tooBig
		}
		// A field's own UnmarshalJSON may name the member at fault.
		var invalid *errs.Error
		if errors.As(err, &invalid) && invalid.Kind == errs.Invalid && len(invalid.Fields) > 0 {
			return errs.InvalidFields("request body: "+invalid.Message, invalid.Fields...)
		}
		return errs.Errorf(errs.Invalid, "request body: %v", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errs.E(errs.Invalid, "request body: data after the JSON document")
	}
	return nil
}

// ReadAll reads a request body bounded with http.MaxBytesReader; going
// over the bound is named as such. Every error is errs.Invalid.
func ReadAll(body io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		if tooBig := overBound(err); tooBig != nil {
			return nil, tooBig
		}
		return nil, errs.Wrap(errs.Invalid, "read the request body", err)
	}
	return raw, nil
}

// overBound is the error for a body over its http.MaxBytesReader bound,
// or nil when err is another.
func overBound(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errs.Errorf(errs.Invalid, "request body over %d bytes", tooBig.Limit)
	}
	return nil
}
