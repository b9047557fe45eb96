package worker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/txmanager"
)

// Metrics are the worker's counters for alerts: holds for funds, nonce
// gaps, halted signers and refused broadcasts, per signer.
type Metrics struct {
	heldTotal    *prometheus.CounterVec
	gapTotal     *prometheus.CounterVec
	haltedTotal  *prometheus.CounterVec
	refusedTotal *prometheus.CounterVec
	// unknownMinedTotal and foundMinedTotal count what a new owner found
	// when the chain was ahead of the database (after a restore).
	unknownMinedTotal *prometheus.CounterVec
	foundMinedTotal   *prometheus.CounterVec
}

// NewMetrics registers the worker's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"chain_id", "signer"}
	m := &Metrics{
		heldTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_insufficient_funds_holds_total",
			Help: "Transactions held because the signer's balance does not cover them and everything pending.",
		}, labels),
		gapTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_nonce_gaps_total",
			Help: "Allocated transactions signerd refused while later nonces were signed, by gap policy.",
		}, append(labels, "policy")),
		haltedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_signer_halts_total",
			Help: "Signers whose work stopped until an operator acts.",
		}, labels),
		refusedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_broadcast_refusals_total",
			Help: "Transactions every route refused, by the node's error category.",
		}, append(labels, "category")),
		unknownMinedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_unknown_mined_nonces_total",
			Help: "Nonces the chain consumed that the database never assigned and no intent it holds explains (after a restore from a backup, or the key used outside txfence).",
		}, labels),
		foundMinedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_found_mined_total",
			Help: "Intents the database held without a nonce that the chain holds mined (sent before a restore from a backup): recorded, never sent again.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.heldTotal, m.gapTotal, m.haltedTotal, m.refusedTotal, m.unknownMinedTotal, m.foundMinedTotal} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func keyLabels(k txmanager.SignerKey) []string {
	return []string{strconv.FormatUint(k.ChainID, 10), k.Signer.Hex()}
}

func (m *Metrics) heldForFunds(k txmanager.SignerKey) {
	if m != nil {
		m.heldTotal.WithLabelValues(keyLabels(k)...).Inc()
	}
}

func (m *Metrics) gap(k txmanager.SignerKey, policy string) {
	if m != nil {
		m.gapTotal.WithLabelValues(append(keyLabels(k), policy)...).Inc()
	}
}

func (m *Metrics) halted(k txmanager.SignerKey) {
	if m != nil {
		m.haltedTotal.WithLabelValues(keyLabels(k)...).Inc()
	}
}

func (m *Metrics) refused(k txmanager.SignerKey, category string) {
	if m != nil {
		m.refusedTotal.WithLabelValues(append(keyLabels(k), category)...).Inc()
	}
}

func (m *Metrics) unknownMined(k txmanager.SignerKey, n int) {
	if m != nil && n > 0 {
		m.unknownMinedTotal.WithLabelValues(keyLabels(k)...).Add(float64(n))
	}
}

func (m *Metrics) foundMined(k txmanager.SignerKey) {
	if m != nil {
		m.foundMinedTotal.WithLabelValues(keyLabels(k)...).Inc()
	}
}
