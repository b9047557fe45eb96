package chaintest

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// Forward passes a JSON-RPC request body on to the node at target and
// writes its answer to w, status and all: the last step of a test's
// proxy in front of anvil (one that records, holds or refuses calls).
func Forward(ctx context.Context, w http.ResponseWriter, target string, body []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
