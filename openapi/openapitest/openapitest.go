// Package openapitest checks a service's HTTP handler against its OpenAPI
// spec in tests: wrap the handler with Conform and every request the tests
// make is checked on the way in and every response on the way out, so the
// spec cannot drift from the code without a test failing.
package openapitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/txfence/txfence/openapi"
)

// Conform wraps next so that each exchange is checked against the spec file
// name (one of openapi's constants), failing t when:
//   - the request names no operation of the spec (an undocumented route);
//   - the response's status, content type, headers or body are not what
//     the operation documents;
//   - the request breaks the spec but the handler answered with success:
//     what the spec refuses, the service must refuse too.
//
// A request that breaks the spec and is refused with a 4xx is the bad-input
// tests' business, and passes. The spec's servers are ignored: any host
// matches.
func Conform(t testing.TB, name string, next http.Handler) http.Handler {
	t.Helper()
	doc, err := openapi.Load(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	options := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		// Who may call is mutual TLS's business, which OpenAPI 3.0 cannot
		// describe; the spec documents it in prose.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := router.FindRoute(r)
		if err != nil {
			t.Errorf("%s %s: not an operation of %s: %v", r.Method, r.URL.Path, name, err)
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("%s %s: read the request body: %v", r.Method, r.URL.Path, err)
			return
		}
		if streams(route.Operation) {
			// A stream never ends by itself, so its response cannot be
			// recorded and checked: only the request is.
			in := &openapi3filter.RequestValidationInput{Request: r.Clone(r.Context()), PathParams: params, Route: route, Options: options}
			in.Request.Body = io.NopCloser(bytes.NewReader(body))
			requestErr := openapi3filter.ValidateRequest(r.Context(), in)
			r.Body = io.NopCloser(bytes.NewReader(body))
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			if requestErr != nil && sw.status < 400 {
				t.Errorf("%s %s breaks %s yet was answered %d:\n%v", r.Method, r.URL.Path, name, sw.status, requestErr)
			}
			return
		}
		in := &openapi3filter.RequestValidationInput{
			Request:    r.Clone(r.Context()),
			PathParams: params,
			Route:      route,
			Options:    options,
		}
		in.Request.Body = io.NopCloser(bytes.NewReader(body))
		requestErr := openapi3filter.ValidateRequest(r.Context(), in)

		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		resp := rec.Result()
		respBody := rec.Body.Bytes()

		if requestErr != nil && resp.StatusCode < 400 {
			t.Errorf("%s %s breaks %s yet was answered %d:\n%v\nrequest: %s", r.Method, r.URL.Path, name, resp.StatusCode, requestErr, truncate(body))
		}
		err = openapi3filter.ValidateResponse(r.Context(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in,
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Body:                   io.NopCloser(bytes.NewReader(respBody)),
			Options:                options,
		})
		if err != nil {
			t.Errorf("%s %s: the %d response breaks %s:\n%v\nresponse: %s", r.Method, r.URL.Path, resp.StatusCode, name, err, truncate(respBody))
		}

		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(respBody)
	})
}

// streams reports whether op answers 200 with a Server-Sent Events stream.
func streams(op *openapi3.Operation) bool {
	ok := op.Responses.Status(http.StatusOK)
	return ok != nil && ok.Value != nil && ok.Value.Content.Get("text/event-stream") != nil
}

// statusWriter remembers the status a streaming handler answered with and
// passes flushes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func truncate(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
