package exactly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// Worker long-polls SQS queues and runs each logical message's effect
// exactly once: FIFO groups in order, many groups in parallel.
type Worker struct {
	pool     *pool.Pool
	metrics  *telemetry.Metrics
	emf      *telemetry.EMF // nil: off
	interval time.Duration  // of the EMF lines
	log      *slog.Logger
	queues   []string
	ran      atomic.Bool

	stopMu    sync.Mutex
	stopped   bool               // Stop or StopAndCancel was called
	cancelRun context.CancelFunc // ends Run's context; nil until Run
	done      chan struct{}      // closed when Run has drained
}

// New checks cfg and everything it names before anything runs: the
// settings, each queue's attributes (FIFO, deduplication scope, visibility
// timeout, dead-letter queue), the dedup table's schema and TTL, and that
// the credentials may make the calls the worker will make (without side
// effects). Every problem it finds is a *ConfigError.
func New(ctx context.Context, cfg Config) (*Worker, error) {
	s, err := check(cfg, false)
	if err != nil {
		return nil, err
	}
	type described struct {
		queues []pool.Queue
		scopes map[string]dedup.Scope
	}
	d, err := startup(ctx, s.log, s.rand, "read the queues", func() (described, error) {
		q, sc, err := s.describeQueues(ctx)
		return described{q, sc}, err
	})
	if err != nil {
		return nil, err
	}
	queues, scopes := d.queues, d.scopes
	store, err := startup(ctx, s.log, s.rand, "check the dedup table", func() (*dedup.Store, error) { return s.store(ctx) })
	if err != nil {
		return nil, err
	}
	if err := preflight(ctx, s.log, s.SQS, s.DynamoDB, queues, s.Table); err != nil {
		return nil, err
	}
	metrics, err := s.metrics()
	if err != nil {
		return nil, err
	}
	emf := s.emf()
	proc := s.processor(store, 30*time.Second, func(m effect.Message) dedup.Scope { return scopes[m.QueueURL] })
	p, err := pool.New(pool.Config{
		Client: s.SQS, Queues: queues, Processor: proc,
		Concurrency: s.Concurrency, MaxInFlight: s.MaxInFlight, ShutdownTimeout: s.ShutdownTimeout,
		WaitTime: s.WaitTime, AckDelay: s.AckDelay, RetryInPlace: s.RetryInPlace,
		Log: s.log, Observer: hookObserver{Metrics: metrics, hooks: s.Hooks, emf: emf}, Rand: s.rand, Step: s.Test.Step,
		OnVisibility: s.Test.OnVisibility,
	})
	if err != nil {
		return nil, err
	}
	return &Worker{pool: p, metrics: metrics, emf: emf, interval: s.EMF.Interval, log: s.log, queues: s.Queues, done: make(chan struct{})}, nil
}

// emf makes the EMF writer Config.EMF asks for, or nil.
func (s *settings) emf() *telemetry.EMF {
	if s.EMF.Writer == nil {
		return nil
	}
	return telemetry.NewEMF(s.EMF.Writer, s.EMF.Namespace)
}

// store checks the dedup table and returns the ledger on it.
func (s *settings) store(ctx context.Context) (*dedup.Store, error) {
	store := dedup.NewStore(s.DynamoDB, s.Table, s.Test.clock()...)
	if err := store.Check(ctx); err != nil {
		if d := denied(err, "dynamodb:DescribeTable and dynamodb:DescribeTimeToLive", "table "+s.Table); d != err { //nolint:errorlint // denied returns err itself unless it is an access denial
			return nil, d
		}
		if transient(err) || errors.Unwrap(err) != nil {
			// A call that failed (a timeout, a reset): no verdict on the
			// table, so no configuration error either.
			return nil, err
		}
		return nil, configErr("Table", ": %w", err)
	}
	return store, nil
}

// metrics makes the worker's collectors, registered on cfg.Registerer.
func (s *settings) metrics() (*telemetry.Metrics, error) {
	m := telemetry.NewMetrics()
	if s.Registerer != nil {
		if err := s.Registerer.Register(m); err != nil {
			return nil, configErr("Registerer", ": cannot register the worker's metrics: %w", err)
		}
	}
	return m, nil
}

// processor is the exactly-once path for one message.
func (s *settings) processor(store *dedup.Store, lease time.Duration, scope func(effect.Message) dedup.Scope) *process.Processor {
	s.log.Info("commit mode", "commit", string(s.Commit), "group_commit_ms", s.GroupCommit.Milliseconds(), "effect", fmt.Sprintf("%T", s.Effect))
	p := &process.Processor{
		Store: store, Effect: s.Effect, Keys: s.keys, Payload: s.payload, TTL: s.TTL, Log: s.log,
		Lease: lease, Scope: scope, Optimistic: s.Commit == CommitOptimistic || s.Commit == CommitCarried, Carried: s.Commit == CommitCarried, WritesOnly: s.Commit == CommitTransactional, Outbox: s.Outbox, Rand: s.rand,
		OnLease: s.Test.OnLease, Unwrap: s.unwrap(),
	}
	if c, ok := s.Effect.(effect.CarriesRecord); ok && p.Carried {
		p.Carrier = c.Carrier()
	}
	if s.GroupCommit > 0 {
		p.Group = &process.GroupCommitter{Store: store, Window: s.GroupCommit}
	}
	if s.TracerProvider != nil {
		p.Tracer = s.TracerProvider.Tracer(process.TracerName)
	}
	return p
}

// Run consumes the queues until ctx is cancelled or Stop is called, then
// drains: it stops receiving at once, lets running effects finish within
// ShutdownTimeout, hands received-but-unstarted messages back to SQS and
// flushes deletes. It returns once drained. A Worker runs once.
//
// The long polls of a queue the worker holds nothing of (an idle one) are
// abandoned at once; SQS goes on serving an abandoned poll for the rest of
// its wait (at most WaitTime), and a message sent meanwhile may be taken by
// it and stay hidden, for nobody, until its visibility timeout: at most 10
// per abandoned poll. A busy queue's polls are left to return (within
// WaitTime) and what they bring is handed back at once, so that what the
// drain hands back cannot be taken by an abandoned poll. StopAndCancel
// abandons every open poll.
//
// On a FIFO queue, what an abandoned poll (an idle stop, StopAndCancel, the
// end of ShutdownTimeout) had already taken is asked back with the poll's receive
// request attempt id and handed back at once, in group order. What SQS
// will not give back (it refuses an attempt id it deems not retryable) is
// logged with how long it stays hidden, and holds its group until then. A
// standard queue has no attempt id: what a cancelled poll took comes back
// after its visibility timeout.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("exactly: Worker.Run called twice")
	}
	defer close(w.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.stopMu.Lock()
	w.cancelRun = cancel
	if w.stopped {
		cancel()
	}
	w.stopMu.Unlock()
	if w.emf == nil {
		w.pool.Run(ctx)
		return nil
	}
	// The EMF lines: one period after another while the pool runs, and
	// the last one once it has drained.
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		telemetry.FlushEvery(stop, w.interval, w.emf.Flush, w.log)
	}()
	w.pool.Run(ctx)
	close(stop)
	<-flushed
	return nil
}

// Stop drains the worker gracefully, as cancelling Run's context does, and
// waits until Run has returned: receiving stops at once, running effects
// finish (within ShutdownTimeout), open long polls return (within WaitTime).
// If ctx ends first, Stop returns ctx's error and the drain goes on; call
// StopAndCancel to cut it short. Stop before Run makes Run return at once;
// a Worker that never runs is stopped already.
func (w *Worker) Stop(ctx context.Context) error {
	w.requestStop()
	return w.wait(ctx)
}

// StopAndCancel is Stop that does not wait for running effects: their
// contexts are cancelled now, as at the end of ShutdownTimeout, and open long
// polls are abandoned (a second Ctrl-C): on a FIFO queue what they had taken
// is asked back and handed back at once (see Run). The cancelled effects'
// messages come back after their visibility timeout, their claims released; a
// commit already under way is still tried once, so that an effect that
// finished is recorded. When that one try fails too (DynamoDB unavailable),
// the claim is released and, in claim mode, the next delivery runs the effect
// again: the first of the windows docs/DESIGN.md lists. It waits for Run to
// return, or for ctx.
func (w *Worker) StopAndCancel(ctx context.Context) error {
	w.requestStop()
	w.pool.Force()
	return w.wait(ctx)
}

func (w *Worker) requestStop() {
	w.stopMu.Lock()
	defer w.stopMu.Unlock()
	w.stopped = true
	if w.cancelRun != nil {
		w.cancelRun()
	}
}

func (w *Worker) wait(ctx context.Context) error {
	if !w.ran.Load() {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are running counts since the Worker started.
type Stats struct {
	Received, Applied, Duplicates, Conflicts, Busy, Retries, PermanentFailures, LeasesLost int64
	// InFlight is received and not yet finished, now.
	InFlight int64
}

// Stats returns the running counts, for a progress line or a health check.
func (w *Worker) Stats() Stats {
	t := w.metrics.Totals()
	return Stats{
		Received: t.Received.Load(), Applied: t.Applied.Load(), Duplicates: t.Duplicates.Load(),
		Conflicts: t.Conflicts.Load(), Busy: t.Busy.Load(), Retries: t.Retries.Load(),
		PermanentFailures: t.Permanent.Load(), LeasesLost: t.LeasesLost.Load(), InFlight: t.InFlight.Load(),
	}
}
