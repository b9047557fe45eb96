package txmanager_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

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

// The INIT event carries the intent's transit namespace with a transit id
// only; the namespace is the caller's, not the client's, so it is not
// part of the intent's hash, and a malformed one is refused.
func TestInitEventCarriesTheTransitNamespace(t *testing.T) {
	t.Parallel()
	in := &txmanager.Intent{ChainID: 1, From: common.HexToAddress("0x01"), RequestID: "r", To: new(common.HexToAddress("0x02")),
		Value: new(big.Int), Route: txmanager.RoutePublic, Metadata: json.RawMessage(`{"transit_id": "rb-1"}`),
		TransitNamespace: "3f2c9a1e-7b4d-4c2a-9e8f-0a1b2c3d4e5f"}
	if e := txmanager.InitEvent(in); e.TransitID != "rb-1" || e.TransitNamespace != in.TransitNamespace {
		t.Errorf("with a transit id: %+v", e)
	}
	hash := in.Hash()
	other := *in
	other.TransitNamespace = "another-tenant"
	if other.Hash() != hash {
		t.Error("the namespace changes the intent's hash")
	}
	plain := *in
	plain.Metadata = json.RawMessage(`{"desk": 7}`)
	if e := txmanager.InitEvent(&plain); e.TransitID != "" || e.TransitNamespace != "" {
		t.Errorf("without a transit id: %+v", e)
	}
	for _, ns := range []string{"has space", "tilde~no", strings.Repeat("n", txmanager.MaxTransitNamespaceLen+1)} {
		bad := *in
		bad.TransitNamespace = ns
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "transit_namespace") {
			t.Errorf("namespace %q: %v", ns, err)
		}
	}
	if err := in.Validate(); err != nil {
		t.Error(err)
	}
}
