// Package keyset is the page cursor of a list ordered by (created_at, id):
// the last row's key, which the next page's query starts after. Clients
// get it as an opaque string; the stores that list that way (gateway's
// webhook subscriptions, txmanager's transactions) share one encoding
// here so that they cannot drift apart.
package keyset

import (
	"encoding/base64"
	"encoding/binary"
	"time"
)

// Encode returns the cursor of the page after the row (at, id): at to the
// microsecond, as PostgreSQL keeps a timestamptz. id is a UUID's bytes.
func Encode(at time.Time, id [16]byte) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, id[:]...))
}

// Decode returns the row key of a cursor Encode made; ok is false for any
// other string, which the caller reports as its own invalid input.
func Decode(s string) (at time.Time, id [16]byte, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8+16 {
		return time.Time{}, id, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), [16]byte(b[8:]), true
}
