package telemetry

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/outbox"
)

// OutboxMetrics are the relay's metrics: Prometheus counters and the lag
// gauge, and, when an EMF writer is given, one EMF line per Flush with the
// counts since the previous one and the last lag seen.
type OutboxMetrics struct {
	table                                 string
	published, duplicates, failed, errors prometheus.Counter
	lag                                   prometheus.Gauge

	emf       io.Writer
	namespace string
	mu        sync.Mutex
	period    outbox.Round
	lastLag   time.Duration
	lagSeen   bool
}

// NewOutboxMetrics registers the relay's metrics with reg (nil: none) for
// table; emf (nil: none) receives EMF lines under namespace
// (EMFNamespaceDefault if empty).
func NewOutboxMetrics(reg prometheus.Registerer, table string, emf io.Writer, namespace string) *OutboxMetrics {
	if namespace == "" {
		namespace = EMFNamespaceDefault
	}
	labels := prometheus.Labels{"table": table}
	m := &OutboxMetrics{
		table: table, emf: emf, namespace: namespace,
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_published_total", ConstLabels: labels,
			Help: "Outbox messages SQS took, first publications and repeats."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_duplicates_total", ConstLabels: labels,
			Help: "Publications known to repeat an earlier one (another relay, or progress lost)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_failed_total", ConstLabels: labels,
			Help: "Outbox messages SQS refused for good, marked failed and passed."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "exactly_outbox_errors_total", ConstLabels: labels,
			Help: "Groups left for a later round after an error."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "exactly_outbox_lag_seconds", ConstLabels: labels,
			Help: "Age of the oldest outbox message not yet published, at the last sweep (0: none)."}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.duplicates, m.failed, m.errors, m.lag)
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.period.Published += r.Published
	m.period.Duplicates += r.Duplicates
	m.period.Failed += r.Failed
	if sweep {
		m.lag.Set(r.Lag.Seconds())
		m.lastLag, m.lagSeen = r.Lag, true
	}
}

// Flush writes the period's EMF line (when there is a writer), stamped now.
func (m *OutboxMetrics) Flush(now time.Time) error {
	if m.emf == nil {
		return nil
	}
	m.mu.Lock()
	p, lag, lagSeen := m.period, m.lastLag, m.lagSeen
	m.period = outbox.Round{}
	m.mu.Unlock()
	metrics := []emfMetric{{EMFOutboxPublished, "Count"}, {EMFOutboxDuplicates, "Count"}, {EMFOutboxFailed, "Count"}}
	doc := map[string]any{
		EMFOutboxDimension:  m.table,
		EMFOutboxPublished:  p.Published,
		EMFOutboxDuplicates: p.Duplicates,
		EMFOutboxFailed:     p.Failed,
	}
	if lagSeen {
		metrics = append(metrics, emfMetric{EMFOutboxLag, "Seconds"})
		doc[EMFOutboxLag] = lag.Seconds()
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
