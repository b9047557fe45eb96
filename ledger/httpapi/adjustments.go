package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// maxAdjustmentBody bounds createAdjustment's body: its fields, the
// reason at most MaxReasonLen characters of up to four bytes each.
const maxAdjustmentBody = 16 << 10

// adjustmentRequest is an AdjustmentRequest of openapi/ledger.yaml, every
// field read as sent so that each problem names its own.
type adjustmentRequest struct {
	ID             *string `json:"adjustment_id"`
	ChainID        *uint64 `json:"chain_id"`
	Wallet         *string `json:"wallet"`
	Asset          *string `json:"asset"`
	Amount         *string `json:"amount"`
	CounterAccount *struct {
		Kind    *string `json:"kind"`
		Address *string `json:"address"`
	} `json:"counter_account"`
	Reason   *string       `json:"reason"`
	Operator *operatorJSON `json:"operator"`
	Approver *operatorJSON `json:"approver"`
}

// operatorJSON is an Operator of openapi/ledger.yaml.
type operatorJSON struct {
	KeyID      *string `json:"key_id"`
	KeyName    *string `json:"key_name"`
	TenantID   *string `json:"tenant_id"`
	TenantName *string `json:"tenant_name"`
}

// errNoOperator refuses an adjustment that names no operator: ledgerd
// books adjustments from the gateway's operator path only, which names the
// admin key that asked (and the one that approved). A bare call with the
// gateway's certificate, as operators were once told to make, is not one.
var errNoOperator = errs.E(errs.Forbidden, "an adjustment is booked only through the gateway's operator path "+
	"(POST /api/v1/ledger/adjustments with an admin key), which names the operator: this request names none")

// createAdjustment books an operator's explanation of a suspense amount
// (ledger.SuspenseAdjustment): 201 with its journal, 200 with the same
// journal when the same adjustment was booked before. A request without
// its operator is refused (errNoOperator).
func (a *API) createAdjustment(w http.ResponseWriter, r *http.Request) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	var req adjustmentRequest
	if err := httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, maxAdjustmentBody), &req); err != nil {
		return err
	}
	if req.Operator == nil {
		return errNoOperator
	}
	adj, err := req.adjustment()
	if err != nil {
		return err
	}
	posted, err := a.store.Adjust(r.Context(), adj)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !posted.Created {
		status = http.StatusOK
	}
	return a.writeJournal(w, r, status, posted.JournalID)
}

// adjustment reads req, naming each field that is missing or malformed.
func (req *adjustmentRequest) adjustment() (*ledger.SuspenseAdjustment, error) {
	var fields []errs.FieldError
	fail := func(pointer, detail string) {
		fields = append(fields, errs.FieldError{Pointer: pointer, Detail: detail})
	}
	var adj ledger.SuspenseAdjustment
	required := func(pointer string, v *string) (string, bool) {
		if v == nil {
			fail(pointer, "required")
			return "", false
		}
		return *v, true
	}
	if id, ok := required("/adjustment_id", req.ID); ok {
		adj.ID = id
		if !ledger.ValidAdjustmentID(id) {
			fail("/adjustment_id", fmt.Sprintf("1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", ledger.MaxAdjustmentIDLen))
		}
	}
	switch {
	case req.ChainID == nil:
		fail("/chain_id", "required")
	case *req.ChainID == 0 || *req.ChainID > maxInt64:
		fail("/chain_id", fmt.Sprintf("a chain id from 1 to %d", uint64(maxInt64)))
	default:
		adj.ChainID = *req.ChainID
	}
	if s, ok := required("/wallet", req.Wallet); ok {
		addr, err := parseAddress(s)
		if err != nil {
			fail("/wallet", err.Error())
		}
		adj.Wallet = addr
	}
	if s, ok := required("/asset", req.Asset); ok {
		asset, err := parseAsset(s)
		if err != nil {
			fail("/asset", err.Error())
		}
		adj.Asset = asset
	}
	if s, ok := required("/amount", req.Amount); ok {
		n, err := parseAmount(s)
		if err != nil {
			fail("/amount", err.Error())
		}
		adj.Amount = n
	}
	if req.CounterAccount == nil {
		fail("/counter_account", "required")
	} else {
		if s, ok := required("/counter_account/kind", req.CounterAccount.Kind); ok {
			adj.Counter = ledger.AccountKind(s)
			if !ledger.ValidAdjustmentCounter(adj.Counter) {
				fail("/counter_account/kind", fmt.Sprintf("must be one of %v: an adjustment moves suspense to the account it belongs to, never to a wallet", ledger.AdjustmentCounterKinds))
			}
		}
		if s, ok := required("/counter_account/address", req.CounterAccount.Address); ok {
			addr, err := parseAddress(s)
			if err != nil {
				fail("/counter_account/address", err.Error())
			}
			adj.CounterAddress = addr
		}
	}
	if s, ok := required("/reason", req.Reason); ok {
		adj.Reason = s
		if !ledger.ValidReason(s) {
			fail("/reason", fmt.Sprintf("1 to %d characters, not only spaces", ledger.MaxReasonLen))
		}
	}
	if req.Operator != nil {
		adj.Operator = req.Operator.operator("/operator", fail)
	}
	if req.Approver != nil {
		ap := req.Approver.operator("/approver", fail)
		adj.Approver = &ap
	}
	if len(fields) == 0 {
		// The rules between the fields (ids per tenant, a second key of
		// the tenant approving) are the domain's.
		if err := adj.Validate(); err != nil {
			return nil, errs.Wrap(errs.Invalid, "the adjustment is invalid: "+strings.ReplaceAll(err.Error(), "\n", "; "), err)
		}
	}
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Pointer
		}
		return nil, errs.InvalidFields("the adjustment is invalid: "+strings.Join(names, ", "), fields...)
	}
	return &adj, nil
}

// operator reads o, the member at pointer, naming each field missing or
// malformed.
func (o *operatorJSON) operator(pointer string, fail func(pointer, detail string)) ledger.Operator {
	var op ledger.Operator
	id := func(name string, v *string) uuid.UUID {
		if v == nil {
			fail(pointer+"/"+name, "required")
			return uuid.Nil
		}
		u, err := uuid.Parse(*v)
		if err != nil || u == uuid.Nil || len(*v) != 36 {
			fail(pointer+"/"+name, "a UUID")
			return uuid.Nil
		}
		return u
	}
	name := func(field string, v *string) string {
		switch {
		case v == nil:
			fail(pointer+"/"+field, "required")
		case strings.TrimSpace(*v) == "" || !utf8.ValidString(*v) || utf8.RuneCountInString(*v) > ledger.MaxOperatorNameLen:
			fail(pointer+"/"+field, fmt.Sprintf("1 to %d characters", ledger.MaxOperatorNameLen))
		default:
			return *v
		}
		return ""
	}
	op.KeyID, op.KeyName = id("key_id", o.KeyID), name("key_name", o.KeyName)
	op.TenantID, op.TenantName = id("tenant_id", o.TenantID), name("tenant_name", o.TenantName)
	return op
}
