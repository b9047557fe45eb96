package servicetest

import (
	"encoding/json"
	"testing"
)

// Decode unmarshals b, an answer's body, or fails the test.
func Decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}
