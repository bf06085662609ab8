package exactly

import (
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// Hooks let a Worker's user watch what it does (their own metrics, traces,
// audit). Each hook is called on the worker's hot path: it must be quick and
// safe for concurrent use.
type Hooks struct {
	// Done is called once per message handled, with what came of it.
	Done func(Done)
}

// Outcome is what handling a message came to.
type Outcome string

// The outcomes of Done, and of a delivery in package exactlytest.
const (
	Applied   Outcome = "applied"   // the effect ran and committed
	Duplicate Outcome = "duplicate" // the key was completed for the same payload: not run
	Conflict  Outcome = "conflict"  // the key was completed for another payload: not run, to the DLQ
	Busy      Outcome = "busy"      // another worker's live lease holds the key: back later
	Retry     Outcome = "retry"     // a retryable failure: retried in place or back to SQS
	Failed    Outcome = "failed"    // a permanent failure: to the DLQ
)

// Done tells what came of one message.
type Done struct {
	Queue   string // the queue's name
	Key     string // the scoped dedup key ("" when the message had none)
	Outcome Outcome
	// LeaseLost: another worker took the claim over while the effect ran.
	LeaseLost bool
	// CommitRetries counts commit attempts after the first.
	CommitRetries int
	Err           error         // why, for Retry, Failed and Conflict
	Took          time.Duration // from the start of processing to the decision
}

// hookObserver adds the user's hooks and the EMF lines (when on) to the
// metrics.
type hookObserver struct {
	*telemetry.Metrics
	hooks Hooks
	emf   *telemetry.EMF // nil: off
}

func (o hookObserver) Received(queue string, n int) {
	o.Metrics.Received(queue, n)
	if o.emf != nil {
		o.emf.Received(queue, n)
	}
}

func (o hookObserver) ReturnedNearRedrive(queue string, n int) {
	o.Metrics.ReturnedNearRedrive(queue, n)
	if o.emf != nil {
		o.emf.ReturnedNearRedrive(queue, n)
	}
}

func (o hookObserver) InFlight(delta int) {
	o.Metrics.InFlight(delta)
	if o.emf != nil {
		o.emf.InFlight(delta)
	}
}

func (o hookObserver) Done(queue string, r process.Result, took time.Duration) {
	o.Metrics.Done(queue, r, took)
	if o.emf != nil {
		o.emf.Done(queue, r, took)
	}
	if o.hooks.Done != nil {
		o.hooks.Done(doneOf(queue, r, took))
	}
}

func doneOf(queue string, r process.Result, took time.Duration) Done {
	d := Done{Queue: queue, Key: r.Key, LeaseLost: r.LeaseLost, CommitRetries: r.CommitRetries, Err: r.Err, Took: took}
	switch {
	case r.Applied && r.Action != process.Fail:
		d.Outcome = Applied
	case r.Outcome == dedup.Duplicate:
		d.Outcome = Duplicate
	case r.Outcome == dedup.Conflict:
		d.Outcome = Conflict
	case r.Outcome == dedup.Busy:
		d.Outcome = Busy
	case r.Action == process.Retry:
		d.Outcome = Retry
	default:
		d.Outcome = Failed
	}
	return d
}
