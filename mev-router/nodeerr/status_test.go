package nodeerr_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// statusError is an error of another HTTP client that carries its answer's
// status, as the relay client's does.
type statusError struct {
	status int
	msg    string
}

func (e statusError) Error() string   { return e.msg }
func (e statusError) StatusCode() int { return e.status }

func TestErrorsCarryingAStatusAreReadLikeHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want nodeerr.Category
	}{
		{statusError{http.StatusForbidden, "invalid signature"}, nodeerr.Transient},
		{statusError{http.StatusServiceUnavailable, "nonce too low"}, nodeerr.Transient},
		{fmt.Errorf("relay: %w", statusError{http.StatusTooManyRequests, "slow down"}), nodeerr.Transient},
		{statusError{http.StatusBadRequest, "nonce too low"}, nodeerr.NonceTooLow},
		{statusError{http.StatusOK, "replacement transaction underpriced"}, nodeerr.ReplacementUnderpriced},
	}
	for _, tt := range tests {
		if got := nodeerr.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
