package mtls

import (
	"context"
	"net/http"
	"slices"

	"github.com/txfence/txfence/shared/errs"
)

type peerKey struct{}

// Peer returns the identity of the verified client certificate of the
// request, as set by Allow. It is "" outside Allow.
func Peer(ctx context.Context) string {
	id, _ := ctx.Value(peerKey{}).(string)
	return id
}

// PeerOf reads the identity of the verified client certificate of r.
func PeerOf(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", errs.E(errs.Unauthorized, "a verified client certificate is required")
	}
	id, err := IdentityOf(r.TLS.VerifiedChains[0][0])
	if err != nil {
		return "", errs.Wrap(errs.Unauthorized, "client certificate has no usable identity", err)
	}
	return id, nil
}

// Allow lets a request through only when its client certificate names one
// of the allowed services, and records that identity in the request context
// (see Peer). Others get a problem document: 401 without an identity, 403
// with one that is not on the list. Mount it per route so that each route
// states who may call it.
func Allow(allowed ...string) func(http.Handler) http.Handler {
	allowed = slices.Clone(allowed)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := PeerOf(r)
			if err != nil {
				errs.WriteProblem(w, errs.ProblemFor(err))
				return
			}
			if !slices.Contains(allowed, id) {
				errs.WriteProblem(w, errs.ProblemFor(errs.Errorf(errs.Forbidden, "identity %q may not call this route", id)))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, id)))
		})
	}
}
