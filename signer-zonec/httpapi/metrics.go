package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/shared/httpserver"
	signer "github.com/txfence/txfence/signer-zonec"
)

type metrics struct {
	decisions *prometheus.CounterVec
	refused   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_signer_decisions_total",
			Help: "Signing decisions, by outcome (signed, replayed, denied, needs_approval, refused) and deciding rule.",
		}, []string{"outcome", "rule"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "txfence_signer_double_sign_refused_total",
			Help: "Requests refused whatever the policy: a second intent at a used nonce, an underpriced replacement, a tx id at a second nonce, a nonce far ahead. Alert on any increase.",
		}),
	}
	reg.MustRegister(m.decisions, m.refused)
	return m
}

// observe counts the decisions and raises the alarm on refusals: a
// refusal means txmanager, or whoever holds its certificate, asked for
// something it must never ask for.
func (a *API) observe(r *http.Request, results []signer.Result) {
	for _, res := range results {
		a.metrics.decisions.WithLabelValues(string(res.Outcome), res.Decision.RuleID).Inc()
		if res.Outcome == signer.OutcomeRefused {
			a.metrics.refused.Inc()
			httpserver.Logger(r.Context()).Error("signing refused",
				"alert", "double_sign_refused", "rule", res.Refusal.Rule, "tx_id", res.Request.TxID, "chain_id", res.Request.ChainID,
				"signer", res.Request.From.Hex(), "nonce", res.Request.Nonce, "reason", res.Refusal.Reason,
				"first_tx_id", res.Refusal.Earlier.TxID, "audit_seq", res.AuditSeq)
		}
	}
}
