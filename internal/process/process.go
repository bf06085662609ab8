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
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/outbox"
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

// DefaultCommitTimeout bounds how long a commit that fails without a verdict
// (5xx or throttling after the SDK's retries, a timeout, TransactionConflict)
// is retried with the same claim while the heartbeat keeps its lease alive.
const DefaultCommitTimeout = time.Minute

// ErrLeaseExpired is the cause of an effect's cancelled context when the
// claim's lease is about to end without a confirmed extension (the
// heartbeat's requests fail or hang): another worker may claim the key once
// it has ended, so the effect must make no further outside call. Nothing
// says another worker has the key yet; the commit, conditioned on the
// claim's token, still decides.
var ErrLeaseExpired = errors.New("process: the claim's lease is ending without a confirmed extension")

// ErrNotHeld: the caller no longer held the message (Hooks.Held) when a
// claim was due after an optimistic effect failed, when a claim was made
// (it is released, nothing run), or when a commit that applies only the
// effect's writes was due (Optimistic, WritesOnly); nothing was committed,
// and the message is left to SQS.
var ErrNotHeld = errors.New("process: the message's visibility passed before its claim or commit; left to SQS")

// claimAttempts is how many times a claim that fails without an answer is
// tried, with the same token, before the message is handed back.
const claimAttempts = 3

// Result of processing one message.
type Result struct {
	Action  Action
	Outcome dedup.Outcome // zero when no claim was made (no key)
	Key     string
	After   time.Duration // Retry: requested delay, 0 for the caller's backoff
	// HeldFor is, when Busy, how long the call holding the key has held it
	// (since its claim, by the claimer's clock).
	HeldFor time.Duration
	Err     error // why (Retry, Fail)
	// LeaseLost is set when the claim was taken over while the effect ran.
	LeaseLost bool
	// Applied is true when this call ran the effect and committed it.
	Applied bool
	// Result is the stored result: the effect's own, or the replay for a duplicate.
	Result []byte
	// CommitRetries counts the commit attempts after the first (errors that
	// were no verdict, retried with the same claim).
	CommitRetries int
	// SentAt is when the message was sent (zero when unknown): its age at
	// the decision tells how far behind the queue is.
	SentAt time.Time
	// TraceID and SpanID name the message's span, for the logs; "" without
	// tracing.
	TraceID, SpanID string
	// EffectTook and CommitTook time the effect and its commit (retries
	// included); zero when they did not run.
	EffectTook, CommitTook time.Duration
}

// Hooks lets the caller take part while the effect runs.
type Hooks struct {
	// Heartbeat, when set, is called every HeartbeatEvery while the effect
	// runs and while its commit is retried. The dedup lease is extended by
	// the processor itself at the same time. (The pool leaves it nil: it
	// extends the visibility of every message it holds itself, also of
	// those waiting for their turn.)
	Heartbeat      func(ctx context.Context) error
	HeartbeatEvery time.Duration
	// Lease overrides the processor's lease for this message.
	Lease time.Duration
	// LeaseUntil, when set, is when the claim's lease ends (on time.Now's
	// clock), whenever the claim is made, and it is never extended (Lambda:
	// before the invocation's deadline, which it must not outlive). An
	// instant, not a duration: a claim made late (after a failed optimistic
	// run) must not count its lease from then.
	LeaseUntil time.Time
	// CommitBy, when set, is when commit retries must have ended (Lambda:
	// the invocation's deadline); otherwise CommitTimeout after the first
	// attempt.
	CommitBy time.Time
	// Scope, when set, is the message's key scope instead of the
	// Processor's Scope answer (Lambda: that of a queue resolved while
	// handling the event).
	Scope *dedup.Scope
	// ReceivedAt, when set, is when the message was received: its span
	// starts then, so that it covers the wait for its turn too.
	ReceivedAt time.Time
	// Held, when set, reports whether the caller still holds the message
	// (the pool: its SQS visibility has not passed). A claim made after the
	// effect already ran once (an optimistic effect that failed) is made
	// only while it does: past its visibility another consumer may have the
	// message. Nil: always held.
	Held func() bool
	// Yield, when set, is called at most once, on the goroutine that called
	// Process, when the message's commit has gone into a group commit's
	// transaction (Processor.Group) to wait for its answer: its effect has
	// returned, and until Process returns only its commit is made (the
	// shared transaction, then any retries alone) and no effect code runs
	// for it. The pool gives the message's concurrency slot back then, so
	// that another message's effect runs while this commit waits. Nil:
	// nothing (the message keeps its caller's slot to the end).
	Yield func()
}

// notHeld reports whether the caller says it no longer holds the message.
func (h Hooks) notHeld() bool { return h.Held != nil && !h.Held() }

// Processor is the per-message exactly-once path.
type Processor struct {
	Store  *dedup.Store
	Effect effect.Effect
	Keys   dedup.KeySource
	// Scope returns the key scope of a message's queue.
	Scope func(m effect.Message) dedup.Scope
	// Payload fingerprints a message to tell duplicates from conflicts; the
	// whole body when zero.
	Payload dedup.PayloadSource
	// Unwrap, when set, turns a message of a queue subscribed to an SNS
	// topic into the published message (sqsmsg.Unwrap) before its key,
	// payload hash and effect see it: ok is false for a queue that is not
	// subscribed. An error fails the message (permanently, to the DLQ).
	Unwrap func(m effect.Message) (out effect.Message, ok bool, err error)
	Lease  time.Duration // default claim lease
	TTL    time.Duration // how long a record suppresses duplicates
	// MaxResult bounds Output.Result; dedup.MaxResultBytes if 0, at most
	// dedup.MaxStoredBytes.
	MaxResult int
	// CommitTimeout bounds the retries of a commit that fails without a
	// verdict; DefaultCommitTimeout if 0. A commit that gives up releases
	// its claim: in transactional mode nothing was applied; in claim mode
	// the effect ran and the next delivery runs it again, with the same key.
	CommitTimeout time.Duration
	// Optimistic skips the claim: the effect runs first and one request
	// commits the COMPLETED record with its Writes (dedup.CommitOptimistic).
	// Only for an effect whose whole effect is the writes it returns
	// (effect.WritesOnly): it may run for a duplicate, whose writes are then
	// dropped. An effect that fails is tried again at once under a claim,
	// which tells a duplicate from a failure before the failure is judged.
	Optimistic bool
	// WritesOnly: the effect's whole effect is the writes it returns
	// (effect.WritesOnly, in transactional mode), as in Optimistic mode.
	// Such a commit applies everything it does, so it is made only while
	// Hooks.Held: past the message's visibility SQS may have moved on
	// without it, and a commit then would break its group's order.
	WritesOnly bool
	// Carried, with Optimistic, commits with no record item of its own:
	// the effect, an effect.CarriesRecord, returns at Writes[Carrier()] a
	// Put of an item that exists once per message, which carries the
	// record (dedup.CommitCarried). No claim ever: an effect that fails is judged
	// at once (the dedup table holds no record to tell a duplicate by),
	// and Group is not used.
	Carried bool
	// Carrier is the index of that Put in Writes (the effect's Carrier()).
	Carrier int
	// Group, when set, makes the first attempt of each optimistic commit
	// together with other messages' (a group commit).
	Group *GroupCommitter
	// Outbox, when set, takes the messages an effect returns in
	// Output.Send: they join the commit's transaction. Nil: an effect that
	// returns Send fails permanently.
	Outbox *outbox.Outbox
	// Tracer, when set, gives each message a span ("process <queue>", a
	// child of the producer's: see ProducerContext) with spans for its
	// claim, effect and commit; the effect's context carries it. Nil: no
	// tracing, at no cost.
	Tracer trace.Tracer
	Log    *slog.Logger
	// Rand jitters the retries and makes the fencing tokens; nil: the
	// runtime's randomness. A test seeds it to replay a run.
	Rand *jitter.Rand
	// OnLease, for tests, is told each lease end the processor comes to
	// count on for a claim (on the ledger's clock), when it does: the
	// claim's answer, each confirmed extension. A simulation holds it
	// against the record's lease_until under the claim's token: it must
	// never be later (but for the record's millisecond precision).
	OnLease func(key, token string, until time.Time)
}

// Process runs m exactly once, as far as the ledger can tell.
func (p *Processor) Process(ctx context.Context, m effect.Message, h Hooks) Result {
	ctx, span := p.startMessage(ctx, m, h.ReceivedAt)
	r := p.process(ctx, m, h)
	if span != nil {
		r.TraceID, r.SpanID = span.SpanContext().TraceID().String(), span.SpanContext().SpanID().String()
	}
	endMessage(span, r)
	return r
}

func (p *Processor) process(ctx context.Context, m effect.Message, h Hooks) Result {
	if p.Unwrap != nil {
		u, ok, err := p.Unwrap(m)
		if err != nil {
			return Result{Action: Fail, Err: err}
		}
		if ok {
			m = u
		}
	}
	raw, err := p.Keys.Extract(m)
	if err != nil {
		return Result{Action: Fail, Err: err}
	}
	scope := p.Scope
	if h.Scope != nil {
		scope = func(effect.Message) dedup.Scope { return *h.Scope }
	}
	key := scope(m).Key(m.Group, raw)
	hash, err := p.Payload.Hash(m.Body)
	if err != nil {
		return Result{Action: Fail, Key: key, Err: err}
	}
	c := Call{Key: key, PayloadSHA256: hash, MessageID: m.ID, Group: m.Group, Attempts: m.ReceiveCount}
	r := p.Run(ctx, c, h, func(ctx context.Context) (effect.Output, error) {
		return p.Effect.Apply(ctx, effect.Input{Message: m, Key: key, DedupKey: raw})
	})
	r.SentAt = m.SentAt
	return r
}

// Call is one operation to run exactly once under a dedup key.
type Call struct {
	Key string // the scoped dedup key
	// PayloadSHA256 fingerprints the operation's input: a key completed with
	// another fingerprint is a conflict, never replayed.
	PayloadSHA256 string
	// MessageID, Group and Attempts are kept in the record for operators.
	MessageID string
	Group     string
	Attempts  int
}

// Run runs fn exactly once for c.Key, as far as the ledger can tell: it
// claims the key, runs fn with heartbeats, and commits its output (its
// Writes in one transaction with the record). A duplicate is not run: the
// stored result comes back in Result.Result. Process is Run for a message.
func (p *Processor) Run(ctx context.Context, c Call, h Hooks, fn func(ctx context.Context) (effect.Output, error)) Result {
	if p.Optimistic {
		return p.runOptimistic(ctx, c, h, fn)
	}
	return p.runClaimed(ctx, c, h, fn)
}

// runClaimed claims the key, runs fn under the claim's lease and commits.
func (p *Processor) runClaimed(ctx context.Context, c Call, h Hooks, fn func(ctx context.Context) (effect.Output, error)) Result {
	key, hash := c.Key, c.PayloadSHA256
	lease := p.Lease
	if h.Lease > 0 {
		lease = h.Lease
	}
	if !h.LeaseUntil.IsZero() {
		if lease = time.Until(h.LeaseUntil); lease <= 0 {
			return Result{Action: Retry, Key: key, Err: fmt.Errorf(
				"dedup key %q: no lease left (it had to end %v ago); not claimed", key, (-lease).Round(time.Millisecond))}
		}
	}
	cctx, endClaim := p.step(ctx, "claim")
	claim, err := p.claim(cctx, dedup.ClaimRequest{
		Key: key, PayloadSHA256: hash, MessageID: c.MessageID, Group: c.Group,
		Attempts: c.Attempts, Lease: lease, LeaseUntil: h.LeaseUntil, TTL: p.TTL,
	})
	endClaim(err)
	if err != nil {
		return Result{Action: Retry, Key: key, Err: err}
	}
	switch claim.Outcome {
	case dedup.Duplicate, dedup.Conflict, dedup.Busy:
		p.noteConflict(ctx, claim, c)
		return blocked(claim, hash)
	}
	p.believe(claim)

	if left := time.Until(claim.LeaseUntil); left < lease/2 {
		// The claim's answer came late (a congested network, long SDK
		// retries): its lease has ended or is about to, and another worker
		// may claim the key at any moment. Starting the effect on it could
		// run it twice; giving the claim back costs a retry.
		p.release(ctx, claim)
		return Result{Action: Retry, Outcome: dedup.Won, Key: key, Err: fmt.Errorf(
			"dedup key %q: the claim answered with %v of its %v lease left; not started on it", key, left.Round(time.Millisecond), lease)}
	}
	if h.notHeld() {
		// The message's visibility passed while the claim was made (its
		// request went out late: a process stalled at the call). Another
		// consumer may have the message, and would find this claim busy
		// for a whole lease: give it back, nothing run.
		p.release(ctx, claim)
		return Result{Action: Retry, Outcome: dedup.Won, Key: key, Err: fmt.Errorf("%w (after its claim of %q)", ErrNotHeld, key)}
	}
	res := Result{Outcome: dedup.Won, Key: key}
	hb := p.startHeartbeat(ctx, claim, lease, h)
	ectx, endEffect := p.step(hb.ctx, "effect")
	effectStart := time.Now()
	out, runErr := p.apply(ectx, c, fn)
	res.EffectTook = time.Since(effectStart)
	endEffect(runErr)
	if runErr == nil && hb.lost.Load() {
		runErr = dedup.ErrLeaseLost
	}
	expired := runErr != nil && errors.Is(context.Cause(hb.ctx), ErrLeaseExpired)
	if expired && !errors.Is(runErr, ErrLeaseExpired) {
		// Whatever the effect made of its cancelled context, the message
		// comes back: it was stopped, not judged.
		runErr = fmt.Errorf("%w (the effect returned: %v)", ErrLeaseExpired, runErr) //nolint:errorlint // the effect's error is told, not wrapped: the expired lease is what callers act on
	}
	if runErr != nil {
		lost := hb.stop()
		res.LeaseLost, res.Err = lost, runErr
		// Release so that the next delivery can claim at once. A release that
		// fails leaves the lease to run out, which is also safe.
		if !lost {
			p.release(ctx, claim)
		}
		if effect.IsPermanent(runErr) {
			res.Action = Fail
		} else {
			res.Action, res.After = Retry, effect.RetryDelay(runErr)
		}
		return res
	}
	// The heartbeat goes on while the commit is retried. Whatever it sees
	// meanwhile (a lost lease, or our own commit that took effect with its
	// response lost) is for the commit to tell: its answer is the verdict.
	// It is stopped before anything is released: an extension after the
	// release would take the claim back.
	tooLarge := p.tooLarge(out.Result)
	var retries int
	commitStart := time.Now()
	switch {
	case len(out.Writes) > 0 || len(out.Send) > 0:
		// Nothing has happened yet (but the effect's outside effects, in
		// claim mode); an oversized result fails the commit before anything
		// is applied.
		if err = tooLarge; err == nil {
			retries, err = p.commit(ctx, claim, out.Result, out.Writes, out.Send, h)
		}
	case tooLarge != nil:
		// The outside effect has run: record it as done, so that no
		// redelivery runs it again, without the result (never truncated),
		// and fail loudly: the effect must return smaller results.
		retries, err = p.commit(ctx, claim, nil, nil, nil, h)
		hb.stop()
		res.CommitTook = time.Since(commitStart)
		if err == nil {
			res.Applied, res.CommitRetries = true, retries
			res.Action, res.Err = Fail, effect.Permanent(fmt.Errorf(
				"effect applied and recorded, but %w: stored without it, duplicates replay none", tooLarge))
			return res
		}
	default:
		retries, err = p.commit(ctx, claim, out.Result, nil, nil, h)
	}
	hb.stop()
	res.CommitTook = time.Since(commitStart)
	res.CommitRetries = retries
	var ece *dedup.EffectConditionError
	switch {
	case err == nil:
		res.Action, res.Applied, res.Result = Delete, true, out.Result
	case errors.Is(err, dedup.ErrLeaseLost):
		// Another worker owns the message now; it will delete or retry it.
		// Transactional effects applied nothing; claim-mode effects did run.
		res.Action, res.LeaseLost, res.Err = Retry, true, err
	case errors.As(err, &ece), errors.Is(err, dedup.ErrResultTooLarge), errors.Is(err, dedup.ErrInvalid):
		// Nothing was applied, and no retry can change that.
		p.release(ctx, claim)
		res.Action, res.Err = Fail, effect.Permanent(err)
	default:
		// The commit gave up (timeout, forced stop). Either nothing was
		// applied, or the record is COMPLETED and the release is refused.
		p.release(ctx, claim)
		res.Action, res.Err = Retry, err
	}
	return res
}

// tooLarge is an error wrapping dedup.ErrResultTooLarge when result
// exceeds MaxResult.
func (p *Processor) tooLarge(result []byte) error {
	limit := p.MaxResult
	if limit <= 0 {
		limit = dedup.MaxResultBytes
	}
	if len(result) > min(limit, dedup.MaxStoredBytes) {
		return fmt.Errorf("%w: the result has %d bytes, more than %d", dedup.ErrResultTooLarge, len(result), limit)
	}
	return nil
}

// blocked is the result of a claim or an optimistic commit that a record of
// another's stopped: a duplicate (deleted, its stored result replayed), a
// conflict (a permanent failure) or another worker's live lease (back after
// it).
func blocked(c dedup.Claim, hash string) Result {
	switch c.Outcome {
	case dedup.Duplicate:
		return Result{Action: Delete, Outcome: dedup.Duplicate, Key: c.Key, Result: c.Record.Result}
	case dedup.Conflict:
		return Result{Action: Fail, Outcome: dedup.Conflict, Key: c.Key, Err: fmt.Errorf(
			"dedup key %q was completed for a different payload (message %s, stored %s, got %s)",
			c.Key, c.Record.MessageID, c.Record.PayloadSHA256, hash)}
	}
	var held time.Duration
	if c.Record != nil && !c.Record.CreatedAt.IsZero() {
		held = max(time.Since(c.Record.CreatedAt), 0)
	}
	return Result{Action: Retry, Outcome: dedup.Busy, Key: c.Key, After: c.Remaining, HeldFor: held,
		Err: fmt.Errorf("dedup key %q is being processed by another worker", c.Key)}
}

// runOptimistic runs fn with no claim, then commits its output in one
// request: the COMPLETED record, on the claim's condition, with its writes.
// The commit is retried with the same token until it is a verdict, so that
// a commit whose response was lost is recognised as ours. An effect that
// fails goes the claimed way instead (runClaimed, which runs it again): a
// duplicate must be deleted, not failed, and only a claim tells.
func (p *Processor) runOptimistic(ctx context.Context, c Call, h Hooks, fn func(ctx context.Context) (effect.Output, error)) Result {
	var ticket *groupTicket // counts this message under way for the group commit
	if p.Group != nil && !p.Carried {
		ticket = p.Group.begin(h.Yield)
		defer ticket.end()
	}
	ectx, endEffect := p.step(ctx, "effect")
	effectStart := time.Now()
	out, err := p.apply(ectx, c, fn)
	effectTook := time.Since(effectStart)
	endEffect(err)
	if err != nil && p.Carried {
		// No claim can tell a duplicate here: the carrier is known only
		// from the effect's output. The failure is judged as it is.
		res := Result{Action: Retry, Key: c.Key, EffectTook: effectTook, Err: err, After: effect.RetryDelay(err)}
		if effect.IsPermanent(err) {
			res.Action, res.After = Fail, 0
		}
		return res
	}
	if err != nil {
		ticket.skip() // its commit, if any, goes under a claim
		if h.notHeld() {
			return Result{Action: Retry, Key: c.Key, EffectTook: effectTook, Err: fmt.Errorf("%w (the optimistic effect failed: %w)", ErrNotHeld, err)}
		}
		p.Log.Debug("effect failed in optimistic mode; trying again under a claim", "key", c.Key, "err", err)
		return p.runClaimed(ctx, c, h, fn)
	}
	res := Result{Key: c.Key, EffectTook: effectTook}
	if err := p.tooLarge(out.Result); err != nil {
		// Nothing was applied, and no retry can change that.
		res.Action, res.Err = Fail, effect.Permanent(err)
		return res
	}
	token, err := p.Rand.ID()
	if err != nil {
		res.Action, res.Err = Retry, err
		return res
	}
	req := dedup.ClaimRequest{
		Key: c.Key, PayloadSHA256: c.PayloadSHA256, MessageID: c.MessageID, Group: c.Group,
		Attempts: c.Attempts, TTL: p.TTL, Token: token,
	}
	var got dedup.Claim
	grouped := p.Group != nil && len(out.Send) == 0 && !p.Carried // outbox heads are read per commit
	if !grouped {
		ticket.skip()
	}
	cctx, endCommit := p.step(ctx, "commit")
	commitStart := time.Now()
	res.CommitRetries, err = p.retryCommit(cctx, c.Key, h, func(cctx context.Context) error {
		var err error
		if grouped {
			grouped = false // retries go alone
			got, err = p.Group.commit(cctx, ticket, dedup.GroupEntry{Req: req, Result: out.Result, Writes: out.Writes})
		} else {
			var writes []types.TransactWriteItem
			if writes, err = p.withSend(cctx, out.Writes, out.Send); err != nil {
				return err
			}
			if p.Carried {
				got, err = p.Store.CommitCarried(cctx, req, out.Result, writes, p.Carrier)
			} else {
				got, err = p.Store.CommitOptimistic(cctx, req, out.Result, writes)
			}
			err = outboxMoved(sized(err, out.Writes, out.Send, writes), len(out.Writes))
		}
		return err
	})
	res.CommitTook = time.Since(commitStart)
	endCommit(err)
	switch {
	case err == nil && got.Outcome == dedup.Won:
		res.Action, res.Outcome, res.Applied, res.Result = Delete, dedup.Won, true, out.Result
		return res
	case errors.Is(err, ErrNotHeld):
		res.Action, res.Err = Retry, err
	case err == nil:
		p.noteConflict(ctx, got, c)
		b := blocked(got, c.PayloadSHA256)
		b.CommitRetries, b.EffectTook, b.CommitTook = res.CommitRetries, res.EffectTook, res.CommitTook
		return b
	case !retryableCommit(err):
		// An effect write's own condition, an invalid request, a result
		// too large: nothing was applied, and no retry can change that.
		res.Action, res.Err = Fail, effect.Permanent(err)
	default:
		// Gave up without a verdict: either nothing was applied, or the
		// record is COMPLETED under our token and the next delivery finds
		// it a duplicate.
		res.Action, res.Err = Retry, err
	}
	return res
}

// claim claims req's key. A claim that fails without an answer may have
// taken effect with its response lost: it is retried with the same token, so
// that a record it wrote is recognised as its own; one that still fails is
// released (refused if it never took effect), so that the next delivery does
// not find this worker's own claim busy.
func (p *Processor) claim(ctx context.Context, req dedup.ClaimRequest) (dedup.Claim, error) {
	token, err := p.Rand.ID()
	if err != nil {
		return dedup.Claim{}, err
	}
	req.Token = token
	for attempt := 1; ; attempt++ {
		c, err := p.Store.Claim(ctx, req)
		if err == nil {
			return c, nil
		}
		if attempt == claimAttempts || ctx.Err() != nil || !sleepCtx(ctx, p.backoff(attempt, 50*time.Millisecond, time.Second)) {
			p.release(ctx, dedup.Claim{Key: req.Key, Token: token})
			return dedup.Claim{}, err
		}
	}
}

// commit writes the COMPLETED record, with the effect's writes in one
// transaction when there are any. An error that is no verdict is retried
// with the same claim: at once after a TransactionConflict, with backoff
// otherwise, until h.CommitBy or CommitTimeout, or until ctx is cancelled
// (a forced stop; the first attempt is made even then: the effect has
// happened). A retry after a lost response is recognised by the token.
func (p *Processor) commit(ctx context.Context, claim dedup.Claim, result []byte, writes []types.TransactWriteItem, send []effect.Outgoing, h Hooks) (retries int, err error) {
	ctx, end := p.step(ctx, "commit")
	defer func() { end(err) }()
	return p.retryCommit(ctx, claim.Key, h, func(cctx context.Context) error {
		if len(writes) == 0 && len(send) == 0 {
			return p.Store.Complete(cctx, claim, result, p.TTL)
		}
		all, err := p.withSend(cctx, writes, send)
		if err != nil {
			return err
		}
		return outboxMoved(sized(p.Store.CompleteTx(cctx, claim, result, p.TTL, all), writes, send, all), len(writes))
	})
}

// sized adds to a commit's dedup.ErrTooLarge what its items are made of,
// when some are the outbox's: the effect's writes, the messages it sends
// and their outbox items (all: the writes, then the outbox items).
func sized(err error, writes []types.TransactWriteItem, send []effect.Outgoing, all []types.TransactWriteItem) error {
	if len(send) == 0 || !errors.Is(err, dedup.ErrTooLarge) {
		return err
	}
	return fmt.Errorf("%w (the effect returned %d writes and %d messages to send, which take %d outbox items)",
		err, len(writes), len(send), len(all)-len(writes))
}

// errOutboxMoved: a commit's outbox items found their groups moved on by
// another producer's transaction. Nothing was applied; the next attempt
// reads the groups again (withSend).
var errOutboxMoved = errors.New("the outbox groups of the commit's messages moved on; reading them again")

// withSend returns writes followed by the outbox items of send, prepared
// against the groups' heads as they are now.
func (p *Processor) withSend(ctx context.Context, writes []types.TransactWriteItem, send []effect.Outgoing) ([]types.TransactWriteItem, error) {
	if len(send) == 0 {
		return writes, nil
	}
	if p.Outbox == nil {
		return nil, fmt.Errorf("%w: the effect returned %d messages to send, and no outbox is configured (exactly.Config.Outbox, worker --outbox-table)", dedup.ErrInvalid, len(send))
	}
	b, err := p.Outbox.Prepare(ctx, outgoing(send))
	if errors.Is(err, outbox.ErrInvalid) {
		return nil, fmt.Errorf("%w: %w", dedup.ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	return append(slices.Clip(writes), b.Items...), nil
}

// outgoing converts an effect's messages to the outbox's.
func outgoing(send []effect.Outgoing) []outbox.Message {
	out := make([]outbox.Message, len(send))
	for i, m := range send {
		out[i] = outbox.Message{QueueURL: m.QueueURL, TopicARN: m.TopicARN, Group: m.Group, Body: m.Body, Attributes: m.Attributes, ID: m.ID}
	}
	return out
}

// outboxMoved turns a commit's failed condition on one of its outbox items
// (those after the effect's n writes) into errOutboxMoved, which is no
// verdict: another producer appended to the group first.
func outboxMoved(err error, n int) error {
	if err == nil {
		return nil
	}
	var ece *dedup.EffectConditionError
	if errors.As(err, &ece) && ece.Index >= n {
		return fmt.Errorf("%w: %w", errOutboxMoved, err)
	}
	return err
}

// retryCommit makes one commit attempt after another until one is a
// verdict (nil included), with the same claim or token: at once after a
// TransactionConflict, with backoff otherwise, until h.CommitBy or
// CommitTimeout, or until ctx is cancelled (the first attempt is made even
// then).
func (p *Processor) retryCommit(ctx context.Context, key string, h Hooks, try func(ctx context.Context) error) (retries int, err error) {
	deadline := h.CommitBy
	if deadline.IsZero() {
		timeout := p.CommitTimeout
		if timeout <= 0 {
			timeout = DefaultCommitTimeout
		}
		deadline = time.Now().Add(timeout)
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	// The wait between attempts ends when ctx does, but for a deadline of
	// ctx when h.CommitBy is set: that is the commit's own end (on Lambda,
	// later than ctx's, which ends with the lease).
	sleep := sleepCtx
	if !h.CommitBy.IsZero() {
		sleep = sleepUnlessCancelled
	}
	for attempt := 1; ; attempt++ {
		if (p.Optimistic || p.WritesOnly) && h.notHeld() {
			// Past the message's visibility: see WritesOnly. Nothing this
			// commit would apply has been (a previous attempt's lost
			// response aside: the next delivery finds that a duplicate).
			if err == nil {
				err = errors.New("before its first attempt")
			}
			return attempt - 1, fmt.Errorf("%w (the commit: %w)", ErrNotHeld, err)
		}
		err = try(cctx)
		if err == nil || !retryableCommit(err) {
			return attempt - 1, err
		}
		wait := p.backoff(attempt, 100*time.Millisecond, 5*time.Second)
		switch {
		case errors.Is(err, dedup.ErrNotAlone):
			// A group commit that gave no verdict on this one: alone, now.
			p.Log.Debug("group commit gave no verdict; committing alone", "key", key, "err", err)
			continue
		case dedup.IsTransactionConflict(err), errors.Is(err, errOutboxMoved):
			wait = p.backoff(attempt, 5*time.Millisecond, 200*time.Millisecond)
		}
		if attempt == 1 {
			p.Log.Warn("commit failed; retrying with the same claim", "key", key, "err", err)
		}
		next := time.Now().Add(wait)
		// reason: "deadline" when the next try would come past the commit's
		// deadline, "stopped" when the wait for it was cut (a forced stop).
		reason := "deadline"
		if time.Until(deadline) >= wait {
			if sleep(ctx, wait) {
				continue
			}
			reason = "stopped"
		}
		p.Log.Warn("commit gave up", "key", key, "attempts", attempt, "err", err, "reason", reason,
			"left_ms", time.Until(deadline).Milliseconds(), "next_ms", time.Until(next).Milliseconds())
		return attempt - 1, err
	}
}

// retryableCommit reports whether a commit error is no verdict, so that the
// same commit may be tried again.
func retryableCommit(err error) bool {
	if errors.Is(err, errOutboxMoved) {
		return true
	}
	var ece *dedup.EffectConditionError
	return !errors.Is(err, dedup.ErrLeaseLost) && !errors.As(err, &ece) &&
		!errors.Is(err, dedup.ErrResultTooLarge) && !errors.Is(err, dedup.ErrInvalid)
}

// release gives a claim up, best effort: a few tries, since a release lost
// to a passing error leaves the next delivery waiting out the lease. It is
// refused (ErrLeaseLost) when the token does not own an IN_PROGRESS record:
// taken over, completed, or never written.
func (p *Processor) release(ctx context.Context, claim dedup.Claim) {
	ctx = context.WithoutCancel(ctx)
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.Store.Release(rctx, claim)
		cancel()
		if err == nil || errors.Is(err, dedup.ErrLeaseLost) {
			return
		}
		if attempt == 3 {
			p.Log.Warn("cannot release claim; its lease runs out instead", "key", claim.Key, "err", err)
			return
		}
		time.Sleep(p.backoff(attempt, 50*time.Millisecond, time.Second))
	}
}

// heartbeat extends a claim's lease (and calls the caller's heartbeat) until
// stopped. When the lease is lost, it cancels ctx, the effect's context.
type heartbeat struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	expiry *time.Timer // cancels ctx when the confirmed lease is ending
	done   chan struct{}
	exited chan struct{}
	lost   atomic.Bool
}

func (p *Processor) startHeartbeat(ctx context.Context, claim dedup.Claim, lease time.Duration, h Hooks) *heartbeat {
	hb := &heartbeat{done: make(chan struct{}), exited: make(chan struct{})}
	hb.ctx, hb.cancel = context.WithCancelCause(ctx)
	// The effect's context ends shortly before the confirmed lease does,
	// unless an extension is confirmed first: an effect that checks it
	// before an outside call makes none on a lease another worker may hold.
	margin := min(lease/10, time.Second)
	expire := func() { hb.cancel(ErrLeaseExpired) }
	hb.expiry = time.AfterFunc(time.Until(claim.LeaseUntil)-margin, expire)
	if !h.LeaseUntil.IsZero() {
		close(hb.exited)
		return hb
	}
	every := h.HeartbeatEvery
	if every <= 0 {
		every = lease / 2
	}
	// The first extension is due when the lease has run for one interval,
	// counted from the claim, not from its answer: a claim that answered
	// late has less of its lease left.
	first := max(every-(lease-time.Until(claim.LeaseUntil)), 0)
	go func() {
		defer close(hb.exited)
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-hb.done:
				return
			case <-t.C:
				t.Reset(every)
			}
			// Stopped as the interval ended (select picks at random among
			// ready cases): no extension of a claim that is done with.
			select {
			case <-hb.done:
				return
			default:
			}
			// Not on hb.ctx: the lease must be kept while the commit is
			// retried, also after a forced stop cancelled the effect. Bounded
			// by the lease left: an extension that answers later is no use.
			ectx, cancel := context.WithTimeout(context.WithoutCancel(hb.ctx), max(time.Until(claim.LeaseUntil), every/4))
			err := p.Store.Extend(ectx, &claim, lease)
			cancel()
			switch {
			case err == nil:
				p.believe(claim)
				hb.expiry.Reset(time.Until(claim.LeaseUntil) - margin)
			case errors.Is(err, dedup.ErrLeaseLost):
				hb.lost.Store(true)
				hb.cancel(err)
				return
			default:
				p.Log.Warn("cannot extend lease", "key", claim.Key, "err", err)
			}
			if h.Heartbeat != nil {
				if err := h.Heartbeat(context.WithoutCancel(hb.ctx)); err != nil {
					p.Log.Warn("heartbeat failed", "key", claim.Key, "err", err)
				}
			}
		}
	}()
	return hb
}

// believe tells OnLease of claim's lease end.
func (p *Processor) believe(claim dedup.Claim) {
	if p.OnLease != nil {
		p.OnLease(claim.Key, claim.Token, claim.LeaseUntil)
	}
}

// stop ends the heartbeat and reports whether it saw the lease lost.
func (hb *heartbeat) stop() (lost bool) {
	select {
	case <-hb.done:
	default:
		close(hb.done)
	}
	<-hb.exited
	hb.expiry.Stop()
	hb.cancel(nil)
	return hb.lost.Load()
}

func (p *Processor) apply(ctx context.Context, c Call, fn func(context.Context) (effect.Output, error)) (out effect.Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.Log.Error("effect panicked", "key", c.Key, "message_id", c.MessageID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("effect panicked: %v", r)
		}
	}()
	return fn(ctx)
}

// backoff is capped exponential backoff with jitter in [d/2, d].
func (p *Processor) backoff(attempt int, base, maxD time.Duration) time.Duration {
	d := base << min(attempt-1, 20)
	if d > maxD || d <= 0 {
		d = maxD
	}
	return p.Rand.Between(d)
}

// sleepUnlessCancelled waits d; false when ctx was cancelled first (a forced
// stop). A deadline of ctx does not end the wait.
func sleepUnlessCancelled(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !errors.Is(ctx.Err(), context.Canceled)
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return false
		}
		<-t.C
		return true
	}
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil // ended as the wait did: ended
	case <-ctx.Done():
		return false
	}
}
