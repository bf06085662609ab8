// Package process runs one message through the exactly-once path shared by the
// ECS pool and the Lambda adapter: key, claim, effect (with lease heartbeats),
// commit. It decides what should happen to the message; the caller carries it
// out against SQS (delete, change visibility, dead-letter).
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
)

// Action is what the caller must do with the message.
type Action int

const (
	// Delete: the effect and its record committed, or it was a duplicate.
	Delete Action = iota + 1
	// Retry: make the message visible again after Result.After (0 = caller's backoff).
	Retry
	// Fail: a permanent failure; leave it to the redrive policy or dead-letter it.
	Fail
)

func (a Action) String() string {
	switch a {
	case Delete:
		return "delete"
	case Retry:
		return "retry"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Result of processing one message.
type Result struct {
	Action  Action
	Outcome dedup.Outcome // zero when no claim was made (no key)
	Key     string
	After   time.Duration // Retry: requested delay, 0 for the caller's backoff
	Err     error         // why (Retry, Fail)
	// LeaseLost is set when the claim was taken over while the effect ran.
	LeaseLost bool
	// Applied is true when this call ran the effect and committed it.
	Applied bool
	// Result is the stored result: the effect's own, or the replay for a duplicate.
	Result []byte
}

// Hooks lets the caller take part while the effect runs.
type Hooks struct {
	// Heartbeat, when set, is called every HeartbeatEvery while the effect
	// runs. The dedup lease is extended by the processor itself at the same
	// time. (The pool leaves it nil: it extends the visibility of every
	// message it holds itself, also of those waiting for their turn.)
	Heartbeat      func(ctx context.Context) error
	HeartbeatEvery time.Duration
	// Lease overrides the processor's lease for this message (Lambda: until
	// the invocation's deadline).
	Lease time.Duration
	// NoExtend turns heartbeats off: the lease is never extended (Lambda,
	// where it must not outlive the invocation).
	NoExtend bool
}

// Processor is the per-message exactly-once path.
type Processor struct {
	Store  *dedup.Store
	Effect effect.Effect
	Keys   dedup.KeySource
	// Scope returns the key scope of a message's queue.
	Scope func(m effect.Message) dedup.Scope
	Lease time.Duration // default claim lease
	TTL   time.Duration // how long a record suppresses duplicates
	Log   *slog.Logger
}

// Process runs m exactly once, as far as the ledger can tell.
func (p *Processor) Process(ctx context.Context, m effect.Message, h Hooks) Result {
	raw, err := p.Keys.Extract(m)
	if err != nil {
		return Result{Action: Fail, Err: err}
	}
	key := p.Scope(m).Key(m.Group, raw)
	lease := p.Lease
	if h.Lease > 0 {
		lease = h.Lease
	}
	hash := dedup.PayloadHash(m.Body)
	claim, err := p.Store.Claim(ctx, dedup.ClaimRequest{
		Key: key, PayloadSHA256: hash, MessageID: m.ID, Group: m.Group,
		Attempts: m.ReceiveCount, Lease: lease, TTL: p.TTL,
	})
	if err != nil {
		return Result{Action: Retry, Key: key, Err: err}
	}
	switch claim.Outcome {
	case dedup.Duplicate:
		return Result{Action: Delete, Outcome: dedup.Duplicate, Key: key, Result: claim.Record.Result}
	case dedup.Conflict:
		return Result{Action: Fail, Outcome: dedup.Conflict, Key: key, Err: fmt.Errorf(
			"dedup key %q was completed for a different payload (message %s, stored %s, got %s)",
			key, claim.Record.MessageID, claim.Record.PayloadSHA256, hash)}
	case dedup.Busy:
		return Result{Action: Retry, Outcome: dedup.Busy, Key: key, After: claim.Remaining,
			Err: fmt.Errorf("dedup key %q is being processed by another worker", key)}
	}

	res := Result{Outcome: dedup.Won, Key: key}
	out, runErr, lost := p.runWithHeartbeat(ctx, &claim, m, lease, h)
	res.LeaseLost = lost
	if runErr != nil {
		res.Err = runErr
		// Release so that the next delivery can claim at once. A release that
		// fails leaves the lease to run out, which is also safe.
		if !lost {
			if rerr := p.Store.Release(context.WithoutCancel(ctx), claim); rerr != nil && !errors.Is(rerr, dedup.ErrLeaseLost) {
				p.Log.Warn("cannot release claim", "key", key, "err", rerr)
			}
		}
		if effect.IsPermanent(runErr) {
			res.Action = Fail
		} else {
			res.Action, res.After = Retry, effect.RetryDelay(runErr)
		}
		return res
	}
	// Commit even if ctx was cancelled meanwhile: the effect has happened.
	cctx := context.WithoutCancel(ctx)
	oversized := len(out.Result) > dedup.MaxResultBytes
	switch {
	case len(out.Writes) > 0:
		// Nothing has happened yet; an oversized result fails the commit
		// (ErrResultTooLarge) before anything is applied.
		err = p.Store.CompleteTx(cctx, claim, out.Result, p.TTL, out.Writes)
	case oversized:
		// The outside effect has run: record it as done, so that no
		// redelivery runs it again, without the result (never truncated),
		// and fail loudly: the effect must return smaller results.
		if err = p.Store.Complete(cctx, claim, nil, p.TTL); err == nil {
			res.Applied = true
			res.Action, res.Err = Fail, effect.Permanent(fmt.Errorf(
				"effect applied and recorded, but its result of %d bytes exceeds %d: stored without it, duplicates replay none",
				len(out.Result), dedup.MaxResultBytes))
			return res
		}
	default:
		err = p.Store.Complete(cctx, claim, out.Result, p.TTL)
	}
	var ece *dedup.EffectConditionError
	switch {
	case err == nil:
		res.Action, res.Applied, res.Result = Delete, true, out.Result
	case errors.Is(err, dedup.ErrLeaseLost):
		// Another worker owns the message now; it will delete or retry it.
		// Transactional effects applied nothing; claim-mode effects did run.
		res.Action, res.LeaseLost, res.Err = Retry, true, err
	case errors.As(err, &ece):
		p.Store.Release(cctx, claim) //nolint:errcheck // best effort, lease runs out otherwise
		res.Action, res.Err = Fail, effect.Permanent(err)
	case errors.Is(err, dedup.ErrResultTooLarge):
		p.Store.Release(cctx, claim) //nolint:errcheck // best effort
		res.Action, res.Err = Fail, effect.Permanent(err)
	default:
		res.Action, res.Err = Retry, err
	}
	return res
}

// runWithHeartbeat runs the effect while extending the lease (and calling the
// caller's heartbeat). If the lease is lost, the effect's context is cancelled.
func (p *Processor) runWithHeartbeat(ctx context.Context, claim *dedup.Claim, m effect.Message, lease time.Duration, h Hooks) (out effect.Output, err error, lost bool) {
	ectx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	every := h.HeartbeatEvery
	if every <= 0 {
		every = lease / 2
	}
	if h.NoExtend {
		every = time.Duration(math.MaxInt64)
	}
	done := make(chan struct{})
	hbDone := make(chan bool, 1)
	go func() {
		lostLease := false
		defer func() { hbDone <- lostLease }()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if err := p.Store.Extend(ectx, claim, lease); err != nil {
				if errors.Is(err, dedup.ErrLeaseLost) {
					lostLease = true
					cancel(err)
					return
				}
				p.Log.Warn("cannot extend lease", "key", claim.Key, "err", err)
			}
			if h.Heartbeat != nil {
				if err := h.Heartbeat(ectx); err != nil {
					p.Log.Warn("heartbeat failed", "key", claim.Key, "err", err)
				}
			}
		}
	}()
	out, err = p.apply(ectx, m, claim.Key)
	close(done)
	lost = <-hbDone
	if lost && err == nil {
		err = dedup.ErrLeaseLost
	}
	return out, err, lost
}

func (p *Processor) apply(ctx context.Context, m effect.Message, key string) (out effect.Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.Log.Error("effect panicked", "key", key, "message_id", m.ID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("effect panicked: %v", r)
		}
	}()
	return p.Effect.Apply(ctx, effect.Input{Message: m, Key: key})
}
