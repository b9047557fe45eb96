package httpapi

import "github.com/google/uuid"

// ledgerAdjustmentPrefix starts the ledger's id of every adjustment of
// tenant: adjustment ids are per tenant, as transit ids are.
func ledgerAdjustmentPrefix(tenant uuid.UUID) string { return tenant.String() + ":" }
