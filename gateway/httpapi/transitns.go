package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

// Transit ids are per tenant. A client marks a transfer's two
// transactions with one metadata.transit_id; the gateway passes txmanager
// the tenant's id as the transaction's transit namespace, txmanager's
// INIT event carries it beside the client's id, and the ledger keys the
// transit by "namespace~id" (openapi/ledger.yaml, TransitId). So no tenant
// can pair a transaction with another tenant's transfer, nor take an id
// another tenant uses. The client's id is what a tenant names and sees:
// the gateway adds its namespace on the way to the ledger and takes it off
// on the way back; a transit of another namespace is never shown.
// Transits linked before namespaces existed keep the client's bare id.

// transitSeparator joins a namespace and a client's id in the ledger's
// transit ids; no client id holds it (the spec's pattern).
const transitSeparator = "~"

// transitNamespace is the namespace of the caller's transit ids: its
// tenant's id, which GET /me shows it too.
func transitNamespace(p *principal) string { return p.tenant.ID.String() }

// ledgerTransitID is the ledger's id of the caller's transit id.
func (p *principal) ledgerTransitID(id string) string {
	return transitNamespace(p) + transitSeparator + id
}

// clientTransitID is the id the caller knows the ledger's transit key by;
// ok is false when the transit is another tenant's namespace. A bare key
// (linked before namespaces) is its own client id.
func (p *principal) clientTransitID(key string) (id string, ok bool) {
	ns, id, namespaced := strings.Cut(key, transitSeparator)
	if !namespaced {
		return key, true
	}
	return id, ns == transitNamespace(p)
}

// withTransitID is the JSON object raw with its member transit_id set to
// id; raw is returned as it is if it is not an object.
func withTransitID(raw []byte, id string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	v, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	fields["transit_id"] = v
	return json.Marshal(fields)
}

// presentMemo is a journal's memo as the caller may see it: the ledger's
// namespaced ids of the caller's own transits and adjustments given back
// as the caller named them, and those of another tenant's left out, with
// the other tenant's operators (a journal of a signer that changed hands
// since). A memo that is not an object, or names none of these, is shown
// as it is.
func (p *principal) presentMemo(raw json.RawMessage) json.RawMessage {
	var memo map[string]json.RawMessage
	if json.Unmarshal(raw, &memo) != nil || memo == nil {
		return raw
	}
	changed := false
	var transit string
	if json.Unmarshal(memo["transit_id"], &transit) == nil && transit != "" {
		if id, ok := p.clientTransitID(transit); !ok {
			delete(memo, "transit_id")
			changed = true
		} else if id != transit {
			memo["transit_id"], _ = json.Marshal(id) // a string always marshals
			changed = true
		}
	}
	var operator struct {
		TenantID uuid.UUID `json:"tenant_id"`
	}
	if json.Unmarshal(memo["operator"], &operator) == nil && operator.TenantID != uuid.Nil {
		var adjustment string
		switch {
		case operator.TenantID != p.tenant.ID:
			delete(memo, "adjustment_id")
			delete(memo, "operator")
			delete(memo, "approver")
			changed = true
		case json.Unmarshal(memo["adjustment_id"], &adjustment) == nil:
			if id, ok := strings.CutPrefix(adjustment, ledgerAdjustmentPrefix(p.tenant.ID)); ok {
				memo["adjustment_id"], _ = json.Marshal(id) // a string always marshals
				changed = true
			}
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(memo)
	if err != nil {
		return raw
	}
	return out
}
