package txmanager_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/txfence/txfence/txmanager"
)

// A transit id is the metadata's string member "transit_id" when it is
// well formed; anything else is none, and the metadata is accepted as it
// is.
func TestTransitIDOf(t *testing.T) {
	t.Parallel()
	longest := strings.Repeat("a", txmanager.MaxTransitIDLen)
	for metadata, want := range map[string]string{
		`{"transit_id": "rb-1"}`:                       "rb-1",
		`{"desk": 7, "transit_id": "A.b_c:D-9"}`:       "A.b_c:D-9",
		`{"\u0074ransit_id": "escaped-name"}`:          "escaped-name",
		`{"transit_id": "` + longest + `"}`:            longest,
		`{"transit_id": "` + longest + `a"}`:           "",
		`{"transit_id": ""}`:                           "",
		`{"transit_id": "has space"}`:                  "",
		`{"transit_id": "slash/no"}`:                   "",
		`{"transit_id": 7}`:                            "",
		`{"transit_id": null}`:                         "",
		`{"Transit_ID": "other-case"}`:                 "",
		`{"meta": {"transit_id": "nested"}}`:           "",
		`{"desk": 7}`:                                  "",
		`{}`:                                           "",
		``:                                             "",
		`["transit_id"]`:                               "",
		`{"transit_id": "rb-1", "transit_id": "rb-2"}`: "rb-2",
		`{"transit_id": "caf\u00e9"}`:                  "",
	} {
		if got := txmanager.TransitIDOf(json.RawMessage(metadata)); got != want {
			t.Errorf("TransitIDOf(%s) = %q, want %q", metadata, got, want)
		}
	}
}
