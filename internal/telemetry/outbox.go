package telemetry

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/outbox"
)

// OutboxMetrics are the relay's metrics: Prometheus counters, the lag and
// held-groups gauges, and, when an EMF writer is given, one EMF line per
// Flush with the counts since the previous one and the last lag and held
// groups seen.
type OutboxMetrics struct {
	table                                            string
	published, duplicates, failed, errors, reordered prometheus.Counter
	lag, held                                        prometheus.Gauge

	emf       io.Writer
	namespace string
	mu        sync.Mutex
	period    outbox.Round
	lastLag   time.Duration
	lastHeld  int
	lagSeen   bool
}

// NewOutboxMetrics registers the relay's metrics with reg (nil: none) for
// table; emf (nil: none) receives EMF lines under namespace
// (DefaultEMFNamespace if empty).
func NewOutboxMetrics(reg prometheus.Registerer, table string, emf io.Writer, namespace string) *OutboxMetrics {
	if namespace == "" {
		namespace = DefaultEMFNamespace
	}
	labels := prometheus.Labels{"table": table}
	m := &OutboxMetrics{
		table: table, emf: emf, namespace: namespace,
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_published_total", ConstLabels: labels,
			Help: "Outbox messages SQS took, first publications and repeats."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_duplicates_total", ConstLabels: labels,
			Help: "Publications known to repeat an earlier one (another relay, or progress lost)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_failed_total", ConstLabels: labels,
			Help: "Outbox messages SQS refused for good for what they hold (invalid characters, ...), marked failed and passed."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_errors_total", ConstLabels: labels,
			Help: "Groups left for a later round after an error (reading, publishing or recording)."}),
		reordered: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_reordered_total", ConstLabels: labels,
			Help: "Outbox groups whose order SQS broke within a SendMessageBatch (Relay.GroupBatch above 1: a message taken after an earlier one was refused), each held."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "exactly_outbox_lag_seconds", ConstLabels: labels,
			Help: "Age of the oldest outbox message not yet published, at the last sweep (0: none)."}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "exactly_outbox_held_groups", ConstLabels: labels,
			Help: "Outbox groups the relay holds at a message SQS refused, waiting for worker outbox release or drop, at the last sweep."}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.duplicates, m.failed, m.errors, m.reordered, m.lag, m.held)
	}
	return m
}

// Observe counts one round of the relay. A sweep's lag is the lag; a
// drain's (it does not read the index) leaves it as it was.
func (m *OutboxMetrics) Observe(r outbox.Round, sweep bool) {
	m.published.Add(float64(r.Published))
	m.duplicates.Add(float64(r.Duplicates))
	m.failed.Add(float64(r.Failed))
	m.errors.Add(float64(r.Errors))
	m.reordered.Add(float64(r.Reordered))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.period.Published += r.Published
	m.period.Duplicates += r.Duplicates
	m.period.Failed += r.Failed
	m.period.Errors += r.Errors
	m.period.Reordered += r.Reordered
	if sweep {
		m.lag.Set(r.Lag.Seconds())
		m.held.Set(float64(r.Held))
		m.lastLag, m.lastHeld, m.lagSeen = r.Lag, r.Held, true
	}
}

// Flush writes the period's EMF line (when there is a writer), stamped now.
func (m *OutboxMetrics) Flush(now time.Time) error {
	if m.emf == nil {
		return nil
	}
	m.mu.Lock()
	p, lag, held, lagSeen := m.period, m.lastLag, m.lastHeld, m.lagSeen
	m.period = outbox.Round{}
	m.mu.Unlock()
	metrics := []emfMetric{{EMFOutboxPublished, "Count"}, {EMFOutboxDuplicates, "Count"}, {EMFOutboxFailed, "Count"}, {EMFOutboxErrors, "Count"}, {EMFOutboxReordered, "Count"}}
	doc := map[string]any{
		EMFOutboxDimension:  m.table,
		EMFOutboxPublished:  p.Published,
		EMFOutboxDuplicates: p.Duplicates,
		EMFOutboxFailed:     p.Failed,
		EMFOutboxErrors:     p.Errors,
		EMFOutboxReordered:  p.Reordered,
	}
	if lagSeen {
		metrics = append(metrics, emfMetric{EMFOutboxLag, "Seconds"}, emfMetric{EMFOutboxHeld, "Count"})
		doc[EMFOutboxLag] = lag.Seconds()
		doc[EMFOutboxHeld] = held
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": m.namespace, "Dimensions": [][]string{{EMFOutboxDimension}}, "Metrics": metrics,
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = m.emf.Write(append(b, '\n'))
	return err
}
