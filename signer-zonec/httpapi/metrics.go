package httpapi

import (
	"net/http"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
)

type metrics struct {
	decisions *textmetrics.CounterVec
	refused   *textmetrics.Counter
}

func newMetrics(reg *textmetrics.Registry) *metrics {
	return &metrics{
		decisions: reg.Counter("txfence_signer_decisions_total",
			"Signing decisions, by outcome (signed, replayed, denied, needs_approval, refused) and deciding rule.",
			"outcome", "rule"),
		refused: reg.Counter("txfence_signer_double_sign_refused_total",
			"Requests refused whatever the policy: a second intent at a used nonce, an underpriced replacement, a tx id at a second nonce, a nonce far ahead. Alert on any increase.").With(),
	}
}

// observe counts the decisions and raises the alarm on refusals: a
// refusal means txmanager, or whoever holds its certificate, asked for
// something it must never ask for.
func (a *API) observe(r *http.Request, results []signer.Result) {
	for _, res := range results {
		a.metrics.decisions.With(string(res.Outcome), res.Decision.RuleID).Inc()
		if res.Outcome == signer.OutcomeRefused {
			a.metrics.refused.Inc()
			httpserver.Logger(r.Context()).Error("signing refused",
				"alert", "double_sign_refused", "rule", res.Refusal.Rule, "tx_id", res.Request.TxID, "chain_id", res.Request.ChainID,
				"signer", res.Request.From.Hex(), "nonce", res.Request.Nonce, "reason", res.Refusal.Reason,
				"first_tx_id", res.Refusal.Earlier.TxID, "audit_seq", res.AuditSeq)
		}
	}
}
