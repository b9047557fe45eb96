// Package tracing carries W3C trace context through txfence's services
// with OpenTelemetry: the server middleware (httpserver.Options.TraceContext,
// daemon.Spec.TraceContext) and the propagator that it and httpclient's
// transport share. It is kept apart from httpserver so that a service that
// calls no other service, signerd, serves without linking OpenTelemetry.
package tracing

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/txfence/txfence/shared/httpserver"
)

// Propagator is the trace context format used on every hop.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Middleware extracts W3C trace context from a request to service, so that
// calls made with the request's context carry the trace on (httpclient),
// and adds its trace id to the request's logger, so that spans and log
// lines of one request share a trace id across hops.
func Middleware(service string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return otelhttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
				r = r.WithContext(httpserver.WithLogger(r.Context(), httpserver.Logger(r.Context()).With("trace_id", sc.TraceID().String())))
			}
			next.ServeHTTP(w, r)
		}), service, otelhttp.WithPropagators(Propagator), otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + r.URL.Path
		}))
	}
}
