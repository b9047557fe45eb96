package keyset_test

import (
	"testing"
	"time"

	"github.com/txfence/txfence/shared/keyset"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 30, 0, 123456789, time.FixedZone("x", 3600))
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	gotAt, gotID, ok := keyset.Decode(keyset.Encode(at, id))
	if !ok {
		t.Fatal("Decode refused a cursor Encode made")
	}
	// PostgreSQL keeps microseconds; the cursor keeps what it keeps, in UTC.
	if want := at.Truncate(time.Microsecond).UTC(); !gotAt.Equal(want) || gotAt.Location() != time.UTC {
		t.Errorf("at = %v, want %v", gotAt, want)
	}
	if gotID != id {
		t.Errorf("id = %x, want %x", gotID, id)
	}
}

func TestDecodeRefusesOtherStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "not base64!", "AAAA", keyset.Encode(time.Unix(0, 0), [16]byte{}) + "AA"} {
		if _, _, ok := keyset.Decode(s); ok {
			t.Errorf("Decode(%q) accepted it", s)
		}
	}
}
