// Package telemetry holds what operators see: Prometheus metrics, the health
// endpoints and the logger.
package telemetry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// Metrics implements pool.Observer and pool.ExtensionObserver with
// Prometheus collectors, and keeps totals for the progress log line.
type Metrics struct {
	Registry *prometheus.Registry

	received      *prometheus.CounterVec
	applied       *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	conflicts     *prometheus.CounterVec
	busy          *prometheus.CounterVec
	retries       *prometheus.CounterVec
	permanent     *prometheus.CounterVec
	leasesLost    *prometheus.CounterVec
	commitRetries *prometheus.CounterVec
	receiveErrors *prometheus.CounterVec
	batchFailures *prometheus.CounterVec
	extFailures   *prometheus.CounterVec
	staleReceipts *prometheus.CounterVec
	nearRedrive   *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	effectTook    *prometheus.HistogramVec
	commitTook    *prometheus.HistogramVec
	age           *prometheus.HistogramVec
	inflight      prometheus.Gauge

	// applying holds each queue's series of an applied message (its
	// *appliedSeries), looked up once: Done runs for every message, and
	// five label lookups (a hash and a read lock each) cost it more than
	// the observations.
	applying sync.Map

	totals Totals
}

// appliedSeries are the series Done updates for an applied message.
type appliedSeries struct {
	applied                      prometheus.Counter
	latency, effect, commit, age prometheus.Observer
}

// appliedOf returns queue's series of an applied message.
func (m *Metrics) appliedOf(queue string) *appliedSeries {
	if s, ok := m.applying.Load(queue); ok {
		return s.(*appliedSeries)
	}
	s, _ := m.applying.LoadOrStore(queue, &appliedSeries{
		applied: m.applied.WithLabelValues(queue), latency: m.latency.WithLabelValues(queue, "applied"),
		effect: m.effectTook.WithLabelValues(queue), commit: m.commitTook.WithLabelValues(queue), age: m.age.WithLabelValues(queue),
	})
	return s.(*appliedSeries)
}

// Totals are running counts for the progress line.
type Totals struct {
	Received, Applied, Duplicates, Conflicts, Busy, Retries, Permanent, LeasesLost atomic.Int64
	InFlight                                                                       atomic.Int64
}

// NewMetrics registers the worker's collectors on a registry of its own
// (Registry); Metrics is also a Collector of them for another registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	counter := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "exactly", Name: name, Help: help}, []string{"queue"})
		r.MustRegister(c)
		return c
	}
	m := &Metrics{
		Registry:      r,
		received:      counter("messages_received_total", "Messages received from SQS."),
		applied:       counter("effects_applied_total", "Effects run and committed."),
		duplicates:    counter("duplicates_total", "Duplicates absorbed: deleted without running the effect."),
		conflicts:     counter("conflicts_total", "Keys completed for a different payload: never run, never acknowledged."),
		busy:          counter("busy_total", "Messages whose key another worker held under a live lease."),
		retries:       counter("retries_total", "Retryable failures: retried in place, or handed back to SQS with backoff."),
		permanent:     counter("permanent_failures_total", "Permanent failures, left to the redrive policy or moved to the DLQ."),
		leasesLost:    counter("leases_lost_total", "Claims taken over by another worker while the effect ran."),
		commitRetries: counter("commit_retries_total", "Commits tried again with the same claim after an error that was no verdict (5xx, throttling, timeout, TransactionConflict)."),
		receiveErrors: counter("receive_errors_total", "Failed ReceiveMessage calls."),
		extFailures:   counter("visibility_extension_failures_total", "Visibility extensions of held messages that failed (whole calls or entries, stale receipts included); tried again soon."),
		staleReceipts: counter("visibility_receipts_stale_total", "Held messages whose receipt handle SQS refused while extending their visibility: no longer the worker's, not started or extended."),
		nearRedrive:   counter("returned_near_redrive_total", "Lambda: messages handed back unstarted (behind a failed message of their FIFO group, or with too little time left) with at most one receive left before the redrive policy moves them."),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "exactly", Name: "handler_duration_seconds", Help: "Time from the start of processing a message to its decision.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"queue", "outcome"}),
		effectTook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "exactly", Name: "effect_duration_seconds", Help: "Time the effect ran (its computation, in optimistic mode).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"queue"}),
		commitTook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "exactly", Name: "commit_duration_seconds", Help: "Time the commit took, its retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"queue"}),
		age: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "exactly", Name: "message_age_seconds",
			Help:    "Age of a message (since SQS accepted it) when it is done: applied or a duplicate. How far behind the queue is.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
		}, []string{"queue"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "exactly", Name: "messages_in_flight", Help: "Messages received and not yet finished."}),
	}
	m.batchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "exactly", Name: "batch_entries_failed_total",
		Help: "Delete and hand-back (visibility change) entries that failed (a failed delete after a commit is harmless: the redelivery is a duplicate). Visibility extensions are counted in exactly_visibility_extension_failures_total.",
	}, []string{"queue", "op"})
	r.MustRegister(m.latency, m.effectTook, m.commitTook, m.age, m.inflight, m.batchFailures)
	return m
}

// own lists the worker's collectors (not the Go and process ones).
func (m *Metrics) own() []prometheus.Collector {
	return []prometheus.Collector{
		m.received, m.applied, m.duplicates, m.conflicts, m.busy, m.retries, m.permanent, m.leasesLost,
		m.commitRetries, m.receiveErrors, m.batchFailures, m.extFailures, m.staleReceipts, m.nearRedrive, m.latency, m.effectTook, m.commitTook, m.age, m.inflight,
	}
}

// Describe implements prometheus.Collector with the worker's own series
// (exactly_*), so that a library user can register them on a registry of
// their own.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.own() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.own() {
		c.Collect(ch)
	}
}

// Totals returns the running counts.
func (m *Metrics) Totals() *Totals { return &m.totals }

// Received implements pool.Observer.
func (m *Metrics) Received(queue string, n int) {
	m.received.WithLabelValues(queue).Add(float64(n))
	m.totals.Received.Add(int64(n))
}

// Done implements pool.Observer.
func (m *Metrics) Done(queue string, r process.Result, took time.Duration) {
	if r.Applied && r.CommitRetries == 0 && !r.LeaseLost && r.Action == process.Delete {
		// Most messages: the same as below, with the series looked up once.
		s := m.appliedOf(queue)
		s.applied.Inc()
		m.totals.Applied.Add(1)
		s.latency.Observe(took.Seconds())
		if r.EffectTook > 0 {
			s.effect.Observe(r.EffectTook.Seconds())
		}
		if r.CommitTook > 0 {
			s.commit.Observe(r.CommitTook.Seconds())
		}
		if !r.SentAt.IsZero() {
			s.age.Observe(max(time.Since(r.SentAt), 0).Seconds())
		}
		return
	}
	label := r.Action.String()
	switch {
	case r.Applied:
		m.applied.WithLabelValues(queue).Inc()
		m.totals.Applied.Add(1)
		label = "applied"
	case r.Outcome == dedup.Duplicate:
		m.duplicates.WithLabelValues(queue).Inc()
		m.totals.Duplicates.Add(1)
		label = "duplicate"
	case r.Outcome == dedup.Conflict:
		m.conflicts.WithLabelValues(queue).Inc()
		m.totals.Conflicts.Add(1)
		label = "conflict"
	case r.Outcome == dedup.Busy:
		m.busy.WithLabelValues(queue).Inc()
		m.totals.Busy.Add(1)
		label = "busy"
	}
	if r.CommitRetries > 0 {
		m.commitRetries.WithLabelValues(queue).Add(float64(r.CommitRetries))
	}
	if r.LeaseLost {
		m.leasesLost.WithLabelValues(queue).Inc()
		m.totals.LeasesLost.Add(1)
	}
	switch r.Action {
	case process.Retry:
		if r.Outcome != dedup.Busy {
			m.retries.WithLabelValues(queue).Inc()
			m.totals.Retries.Add(1)
		}
	case process.Fail:
		m.permanent.WithLabelValues(queue).Inc()
		m.totals.Permanent.Add(1)
	}
	m.latency.WithLabelValues(queue, label).Observe(took.Seconds())
	if r.EffectTook > 0 {
		m.effectTook.WithLabelValues(queue).Observe(r.EffectTook.Seconds())
	}
	if r.CommitTook > 0 {
		m.commitTook.WithLabelValues(queue).Observe(r.CommitTook.Seconds())
	}
	if r.Action == process.Delete && !r.SentAt.IsZero() {
		m.age.WithLabelValues(queue).Observe(max(time.Since(r.SentAt), 0).Seconds())
	}
}

// ReceiveError implements pool.Observer.
func (m *Metrics) ReceiveError(queue string, _ error) { m.receiveErrors.WithLabelValues(queue).Inc() }

// BatchFailed implements pool.Observer.
func (m *Metrics) BatchFailed(queue, op string, n int) {
	m.batchFailures.WithLabelValues(queue, op).Add(float64(n))
}

// ExtensionFailed implements pool.ExtensionObserver.
func (m *Metrics) ExtensionFailed(queue string, n int) {
	m.extFailures.WithLabelValues(queue).Add(float64(n))
}

// ReceiptStale implements pool.ExtensionObserver.
func (m *Metrics) ReceiptStale(queue string, n int) {
	m.staleReceipts.WithLabelValues(queue).Add(float64(n))
}

// ReturnedNearRedrive implements sqsevent.Observer.
func (m *Metrics) ReturnedNearRedrive(queue string, n int) {
	m.nearRedrive.WithLabelValues(queue).Add(float64(n))
}

// InFlight implements pool.Observer.
func (m *Metrics) InFlight(delta int) {
	m.inflight.Add(float64(delta))
	m.totals.InFlight.Add(int64(delta))
}
