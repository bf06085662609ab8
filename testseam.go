package exactly

import (
	"math/rand/v2"
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// TestConfig is a seam for tests (Config.Test): it hands a Worker or a
// Lambda handler the clock its ledger reads and the randomness behind its
// jitter, so that a test, or a simulation running many of them in virtual
// time, can skew a process's clock and replay a run from its seed. Its zero
// value is production's behaviour; a deployment leaves it zero.
type TestConfig struct {
	// Now is the ledger's clock: the instants its records carry (a claim's
	// lease, a record's expiry) and the ones it compares them with.
	// Nil: time.Now. Timers and deadlines follow the runtime's clock
	// whatever Now says (under testing/synctest, the bubble's).
	Now func() time.Time
	// Rand is the source of every random draw: the jitter of the start-up,
	// receive, claim, commit, release and retry backoffs, the fencing tokens
	// of claims and the receive request attempt ids. Nil: math/rand/v2's
	// global source for jitter and crypto/rand for tokens and ids. Give each
	// Worker or handler a source of its own (say rand.NewPCG(seed, n)): its
	// calls are serialised inside one, not across several.
	Rand rand.Source
	// OnLease, when set, is told each lease end the worker comes to count
	// on for a claim, when it does (the claim's answer, each confirmed
	// extension), on Now's clock: the key, the claim's fencing token and
	// the end. OnVisibility, when set, is told each visibility deadline a
	// Worker comes to count on for a message (at its receive, at each
	// confirmed extension), on the runtime's clock, with the receipt
	// handle. Neither may ever be later than what the ledger or SQS
	// holds (the ledger keeps milliseconds): a simulation checks that
	// they are not. Both are called on the worker's own goroutines and
	// must not block.
	OnLease      func(key, token string, until time.Time)
	OnVisibility func(receipt string, until time.Time)

	// Step, when set, is called where a Worker's goroutines that one event
	// wakes together would race, before they touch what they share: a
	// lane about to take a handler's slot for a message ("lane <queue>
	// <message id>"), the visibility keeper about to extend ("keep
	// <queue>"), the batcher about to send deletes and visibility changes
	// ("flush <queue>"); a Lambda handler's lane of a batch (a FIFO group,
	// or a message of a standard queue) before it takes a slot ("lane
	// <first message id>"). A simulation in virtual time sleeps there a
	// latency of its own choosing, so that those goroutines run in an
	// order its seed fixes, not the Go runtime's. Nil: nothing.
	Step func(what string)
}

// clock is the ledger's option for Test.Now.
func (t TestConfig) clock() []dedup.Option {
	if t.Now == nil {
		return nil
	}
	return []dedup.Option{dedup.WithClock(t.Now)}
}
