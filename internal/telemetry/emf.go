package telemetry

import (
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// DefaultEMFNamespace is the CloudWatch namespace of the EMF metrics.
const DefaultEMFNamespace = "exactly"

// EMF metric names, the contract with dashboards and the alarms module:
// counts per queue (dimension Queue, the queue's name) since the previous
// flush, and latency samples.
const (
	EMFReceived          = "Received"
	EMFApplied           = "Applied"
	EMFDuplicates        = "Duplicates"
	EMFConflicts         = "Conflicts"
	EMFBusy              = "Busy"
	EMFRetries           = "Retries"
	EMFPermanentFailures = "PermanentFailures"
	EMFLeasesLost        = "LeasesLost"
	// EMFReturnedNearRedrive: Lambda's messages handed back unstarted
	// with at most one receive left before the redrive policy moves them.
	EMFReturnedNearRedrive = "ReturnedNearRedrive"
	EMFEffectLatency       = "EffectLatency" // milliseconds
	EMFCommitLatency       = "CommitLatency" // milliseconds
	EMFMessageAge          = "MessageAge"    // seconds, when a message is done
	// EMFInFlight is the messages a worker holds (received, not finished)
	// at the flush: one line of its own, without dimensions.
	EMFInFlight = "InFlight"
)

// EMF metrics of the outbox relay, one line per flush with the dimension
// OutboxTable (the table's name): counts since the previous flush, and the
// lag at the flush.
const (
	EMFOutboxPublished  = "OutboxPublished"  // messages published (first time or again)
	EMFOutboxDuplicates = "OutboxDuplicates" // publications known to repeat an earlier one
	EMFOutboxFailed     = "OutboxFailed"     // messages SQS refused for good (marked failed)
	EMFOutboxLag        = "OutboxLag"        // seconds: age of the oldest message not yet published
	EMFOutboxHeld       = "OutboxHeldGroups" // groups held for an operator, at the last sweep
	EMFOutboxErrors     = "OutboxErrors"     // groups left for a later round after an error
	EMFOutboxReordered  = "OutboxReordered"  // groups whose order SQS broke within a batch (Relay.GroupBatch), held
	EMFOutboxDimension  = "OutboxTable"
)

// FlushEvery calls flush every interval until stop is closed, then once
// more, and returns: a long-running process's EMF lines, the last period's
// included. A failed write is logged; the next period goes on.
func FlushEvery(stop <-chan struct{}, interval time.Duration, flush func(now time.Time) error, log *slog.Logger) {
	write := func(now time.Time) {
		if err := flush(now); err != nil {
			log.Warn("cannot write the EMF metrics", "err", err)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			write(time.Now())
			return
		case now := <-t.C:
			write(now)
		}
	}
}

// emfCounts are the EMF counters in the order they are written.
var emfCounts = []string{EMFReceived, EMFApplied, EMFDuplicates, EMFConflicts, EMFBusy, EMFRetries, EMFPermanentFailures, EMFLeasesLost, EMFReturnedNearRedrive}

// emfMaxSamples bounds a latency metric's values in one line: the format
// allows 100.
const emfMaxSamples = 100

// EMF writes the worker's metrics as CloudWatch Embedded Metric Format
// lines: on Lambda (stdout is the function's log) and on ECS with the
// awslogs driver, CloudWatch extracts them with no agent and no scraper.
// It is told what happens as the Prometheus metrics are (Received, Done);
// Flush writes one line per queue with what happened since the previous
// flush, and nothing for a queue where nothing did. Latencies are raw
// samples, at most 100 per metric and line (the first ones of the period).
// Safe for concurrent use.
type EMF struct {
	w         io.Writer
	namespace string

	mu       sync.Mutex
	queues   map[string]*emfQueue
	inFlight int64
	held     bool // InFlight was ever told: a worker, whose line it writes
}

type emfQueue struct {
	counts              map[string]float64
	effect, commit, age []float64 // the period's first samples
}

// NewEMF writes to w under namespace (DefaultEMFNamespace if empty).
func NewEMF(w io.Writer, namespace string) *EMF {
	if namespace == "" {
		namespace = DefaultEMFNamespace
	}
	return &EMF{w: w, namespace: namespace, queues: map[string]*emfQueue{}}
}

func (e *EMF) queue(name string) *emfQueue {
	q := e.queues[name]
	if q == nil {
		q = &emfQueue{counts: map[string]float64{}}
		e.queues[name] = q
	}
	return q
}

// Received counts n messages received from queue.
func (e *EMF) Received(queue string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue(queue).counts[EMFReceived] += float64(n)
}

// ReturnedNearRedrive counts n messages of queue handed back unstarted
// near the redrive policy's limit.
func (e *EMF) ReturnedNearRedrive(queue string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue(queue).counts[EMFReturnedNearRedrive] += float64(n)
}

// InFlight moves the count of messages held by delta.
func (e *EMF) InFlight(delta int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inFlight += int64(delta)
	e.held = true
}

// Done counts what came of one message, as Metrics.Done does.
func (e *EMF) Done(queue string, r process.Result, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue(queue)
	switch {
	case r.Applied:
		q.counts[EMFApplied]++
	case r.Outcome == dedup.Duplicate:
		q.counts[EMFDuplicates]++
	case r.Outcome == dedup.Conflict:
		q.counts[EMFConflicts]++
	case r.Outcome == dedup.Busy:
		q.counts[EMFBusy]++
	}
	if r.LeaseLost {
		q.counts[EMFLeasesLost]++
	}
	switch r.Action {
	case process.Retry:
		if r.Outcome != dedup.Busy {
			q.counts[EMFRetries]++
		}
	case process.Fail:
		q.counts[EMFPermanentFailures]++
	}
	sample := func(s *[]float64, v float64) {
		if len(*s) < emfMaxSamples {
			*s = append(*s, v)
		}
	}
	if r.EffectTook > 0 {
		sample(&q.effect, float64(r.EffectTook.Microseconds())/1000)
	}
	if r.CommitTook > 0 {
		sample(&q.commit, float64(r.CommitTook.Microseconds())/1000)
	}
	if r.Action == process.Delete && !r.SentAt.IsZero() {
		sample(&q.age, max(time.Since(r.SentAt), 0).Seconds())
	}
}

// Flush writes a line per queue with what happened since the previous
// flush, stamped now, and starts a new period.
func (e *EMF) Flush(now time.Time) error {
	e.mu.Lock()
	queues := e.queues
	e.queues = map[string]*emfQueue{}
	inFlight, held := e.inFlight, e.held
	e.mu.Unlock()
	names := make([]string, 0, len(queues))
	for name := range queues {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		line, err := e.line(name, queues[name], now)
		if err != nil {
			return err
		}
		if _, err := e.w.Write(line); err != nil {
			return err
		}
	}
	if !held {
		return nil
	}
	line, err := json.Marshal(map[string]any{
		EMFInFlight: inFlight,
		"_aws": map[string]any{"Timestamp": now.UnixMilli(), "CloudWatchMetrics": []any{map[string]any{
			"Namespace": e.namespace, "Dimensions": [][]string{{}}, "Metrics": []emfMetric{{EMFInFlight, "Count"}},
		}}},
	})
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(line, '\n'))
	return err
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

func (e *EMF) line(queue string, q *emfQueue, now time.Time) ([]byte, error) {
	doc := map[string]any{"Queue": queue}
	var metrics []emfMetric
	for _, name := range emfCounts {
		metrics = append(metrics, emfMetric{name, "Count"})
		doc[name] = q.counts[name] // zero too: a period with nothing of a kind is data
	}
	for _, s := range []struct {
		name, unit string
		values     []float64
	}{{EMFEffectLatency, "Milliseconds", q.effect}, {EMFCommitLatency, "Milliseconds", q.commit}, {EMFMessageAge, "Seconds", q.age}} {
		if len(s.values) > 0 {
			metrics = append(metrics, emfMetric{s.name, s.unit})
			doc[s.name] = s.values
		}
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  e.namespace,
			"Dimensions": [][]string{{"Queue"}},
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
