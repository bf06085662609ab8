// Package idempotency makes any operation exactly-once with the same DynamoDB
// ledger the worker uses for SQS messages: a payment from an HTTP handler, an
// EventBridge or Kinesis event in a Lambda function, a cron job that may run
// twice. It is the Go counterpart of Powertools' idempotent_function.
//
// The first call with a key claims it (one conditional PutItem), runs the
// function and stores its result with the record (one UpdateItem). A call
// with the same key and the same input gets the stored result back without
// running the function, for as long as the record lives (Expiry). A call with
// the same key and another input gets ErrPayloadMismatch; a call while the
// first still runs gets an *InProgressError. A function that fails releases
// its claim, so that a retry runs it again.
//
// WrapTx is the transactional variant: the function's DynamoDB writes commit
// in one transaction with the record, so they are applied exactly once
// whatever fails. With Wrap, the function's own side effects happen outside
// the ledger: if the process dies between the function and the commit of its
// record, the next call runs it again, with the same key (pass it downstream
// as an idempotency key; Key gives it to the function).
//
// Middleware applies the same ledger at an HTTP API's edge, following the
// IETF Idempotency-Key draft.
//
// The table is the worker's dedup table (partition key "pk", TTL attribute
// "expires_at"); records of different functions are kept apart by their
// names and the Ledger's Namespace.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// DynamoDB is the part of the DynamoDB client the ledger uses.
// *dynamodb.Client satisfies it.
type DynamoDB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// Defaults of Config.
const (
	// DefaultExpiry is how long a completed record answers duplicates.
	DefaultExpiry = time.Hour
	// DefaultInProgressExpiry is the lease of a running call outside Lambda;
	// it is extended every half of it while the function runs.
	DefaultInProgressExpiry = time.Minute
	// DefaultNamespace prefixes every key the package writes.
	DefaultNamespace = "idempotency"
	// MaxResultBytes bounds a stored result: the JSON of a function's
	// output, or the body of an HTTP response (its status and headers are
	// stored besides, up to as much again).
	MaxResultBytes = 16 << 10
)

// Config configures a Ledger.
type Config struct {
	// DynamoDB is the client; required.
	DynamoDB DynamoDB
	// Table is the dedup table; required.
	Table string
	// Namespace prefixes every key, so that several services can share a
	// table. Defaults to "idempotency".
	Namespace string
	// Expiry is how long a completed call answers duplicates with its
	// result. Defaults to 1 hour.
	Expiry time.Duration
	// InProgressExpiry is how long a running call holds its key before
	// another may take it over. Outside Lambda it is extended every half of
	// it while the function runs; inside a Lambda invocation the claim lasts
	// until the invocation's deadline and is not extended. Defaults to 1
	// minute.
	InProgressExpiry time.Duration
	// Logger receives warnings (commit retries, releases, inputs run
	// without a key). Defaults to slog.Default().
	Logger *slog.Logger
}

// Ledger runs functions exactly once per key. It is safe for concurrent use.
type Ledger struct {
	cfg   Config
	store *dedup.Store
	proc  *process.Processor
}

// New returns a Ledger, or an error naming the missing setting.
func New(cfg Config) (*Ledger, error) {
	switch {
	case cfg.DynamoDB == nil:
		return nil, errors.New("idempotency: Config.DynamoDB is nil: pass a *dynamodb.Client")
	case cfg.Table == "":
		return nil, errors.New("idempotency: Config.Table is empty: name the dedup table (worker setup --table creates one)")
	case cfg.Expiry < 0 || cfg.InProgressExpiry < 0:
		return nil, errors.New("idempotency: Config.Expiry and Config.InProgressExpiry must not be negative")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Expiry == 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.InProgressExpiry == 0 {
		cfg.InProgressExpiry = DefaultInProgressExpiry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	store := dedup.NewStore(cfg.DynamoDB, cfg.Table)
	return &Ledger{cfg: cfg, store: store, proc: &process.Processor{
		Store: store, Lease: cfg.InProgressExpiry, TTL: cfg.Expiry, Log: cfg.Logger,
	}}, nil
}

// Check verifies that the table exists with the dedup schema and TTL on
// expires_at; call it at start-up to fail fast on a wrong table.
func (l *Ledger) Check(ctx context.Context) error { return l.store.Check(ctx) }

var (
	// ErrPayloadMismatch is returned when the key was completed for another input (another
	// payload fingerprint). The function was not run. Retrying cannot help.
	ErrPayloadMismatch = errors.New("idempotency: the key was already used for a different payload")
	// ErrKeyMissing is returned when the input holds no key where KeyPointers or KeyFunc
	// look for one (and AllowMissingKey was not given). The function was
	// not run.
	ErrKeyMissing = errors.New("idempotency: no idempotency key in the input")
	// ErrInProgress is matched (errors.Is) by every *InProgressError.
	ErrInProgress = errors.New("idempotency: a call with this key is in progress")
	// ErrResultNotStored is returned when the key's call completed, but its result exceeded
	// MaxResultBytes and was not stored, so a duplicate cannot replay it.
	ErrResultNotStored = errors.New("idempotency: the call completed, but its result was too large to store")
)

// InProgressError is returned while another call holds the key.
//
// RetryAfter is a hint of when that call may be done: as long again as it
// has run so far, at least 1 s and at most 5 s, and no later than the end
// of its claim. A call tends to take about as long as calls before it, and
// a retry that comes too soon costs one more cheap conditional write,
// while one that waits out the whole claim (a minute by default) keeps the
// client waiting long after a two-second call has finished.
type InProgressError struct {
	Key        string
	RetryAfter time.Duration
}

// Bounds of InProgressError.RetryAfter.
const (
	minRetryAfter = time.Second
	maxRetryAfter = 5 * time.Second
)

// retryHint is InProgressError.RetryAfter for a call that has held its key
// for held, with left of its claim to go.
func retryHint(held, left time.Duration) time.Duration {
	return min(max(held, minRetryAfter), maxRetryAfter, left)
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: key %q is in progress; retry in %v", e.Key, e.RetryAfter.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// Key returns the scoped dedup key of the call running in ctx: pass it to a
// downstream as its idempotency key. Empty outside a wrapped function.
func Key(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}

type keyCtx struct{}

// Wrap returns fn made idempotent under name: each key runs once, and its
// duplicates get the stored result. The key is derived from the input (the
// SHA-256 of its JSON by default; see KeyPointers and KeyFunc), and so is
// the payload fingerprint (ValidatePointers). An input without the key
// that KeyPointers or KeyFunc look for fails with ErrKeyMissing, unrun
// (see AllowMissingKey). The output is stored as JSON: Out must round-trip
// through encoding/json.
//
// Wrap panics, as regexp.MustCompile does, when an option cannot work for
// fn, a mistake that would otherwise fail every call: a KeyFunc for another
// input type, a KeyPointers or ValidatePointers argument that is not a
// JSON pointer ("order" for "/order"), an Expiry that is not positive. The
// panic names the option and the fix; it happens where the function is
// wrapped (at start-up, or in the first test that builds it), never in a
// call.
func Wrap[In, Out any](l *Ledger, name string, fn func(context.Context, In) (Out, error), opts ...Option) func(context.Context, In) (Out, error) {
	// Never optimistic: fn has effects of its own, which must not run for
	// a duplicate.
	opts = append(opts, func(s *settings) { s.optimistic = false })
	return WrapTx(l, name, func(ctx context.Context, in In) (Out, []types.TransactWriteItem, error) {
		out, err := fn(ctx, in)
		return out, nil, err
	}, opts...)
}

// WrapTx is Wrap for a function whose whole effect is its DynamoDB writes:
// it returns them instead of making them, and they commit in one
// TransactWriteItems with the record (at most 99 writes, 400 KB per item,
// 4 MB in all), conditioned on the call's claim. They are applied exactly
// once whatever fails. A write whose own condition fails, or writes past
// those limits, make the call fail at once with an error matching
// effect.IsPermanent; nothing is applied. WrapTx panics on the mistakes
// Wrap does.
func WrapTx[In, Out any](l *Ledger, name string, fn func(context.Context, In) (Out, []types.TransactWriteItem, error), opts ...Option) func(context.Context, In) (Out, error) {
	s := settings{expiry: l.cfg.Expiry}
	for _, o := range opts {
		o(&s)
	}
	if err := s.check(reflect.TypeFor[In]()); err != nil {
		panic(fmt.Sprintf("idempotency: Wrap %q: %v", name, err))
	}
	scope := dedup.Scope{Namespace: l.cfg.Namespace, Queue: name}
	proc := l.processor(s.expiry, s.optimistic, 0)
	return func(ctx context.Context, in In) (Out, error) {
		var zero Out
		doc, err := json.Marshal(in)
		if err != nil {
			return zero, fmt.Errorf("idempotency: %s: encoding the input: %w", name, err)
		}
		raw, err := s.key(in, doc)
		if errors.Is(err, errNoKey) {
			if !s.allowNoKey {
				return zero, fmt.Errorf("%w (%s: %w)", ErrKeyMissing, name, err)
			}
			l.cfg.Logger.Warn("no idempotency key in the input; running without idempotency", "function", name, "err", err)
			out, _, err := fn(ctx, in)
			return out, err
		}
		if err != nil {
			return zero, fmt.Errorf("idempotency: %s: %w", name, err)
		}
		fp, err := s.fingerprint(doc)
		if err != nil {
			return zero, fmt.Errorf("idempotency: %s: %w", name, err)
		}
		var out Out
		key := scope.Key("", raw)
		r := l.run(ctx, proc, key, fp, func(ctx context.Context) (effect.Output, error) {
			o, writes, err := fn(context.WithValue(ctx, keyCtx{}, key), in)
			if err != nil {
				return effect.Output{}, err
			}
			out = o
			b, err := json.Marshal(o)
			if err != nil {
				return effect.Output{}, effect.Permanent(fmt.Errorf("idempotency: %s: encoding the output: %w", name, err))
			}
			return effect.Output{Result: b, Writes: writes}, nil
		})
		if r.Applied {
			if r.Err != nil { // stored without its oversized result
				l.cfg.Logger.Warn("result too large to store; duplicates will get ErrResultNotStored", "function", name, "key", key, "err", r.Err)
			}
			return out, nil
		}
		stored, err := verdict(r)
		if err != nil {
			return zero, err
		}
		if len(stored) == 0 {
			return zero, fmt.Errorf("%w (key %q)", ErrResultNotStored, key)
		}
		if err := json.Unmarshal(stored, &out); err != nil {
			return zero, fmt.Errorf("idempotency: %s: decoding the stored result of key %q: %w", name, key, err)
		}
		return out, nil
	}
}

// processor is the Ledger's processor with these settings (maxResult 0:
// MaxResultBytes).
func (l *Ledger) processor(expiry time.Duration, optimistic bool, maxResult int) *process.Processor {
	if expiry == l.cfg.Expiry && !optimistic && maxResult == 0 {
		return l.proc
	}
	p := *l.proc
	p.TTL, p.Optimistic, p.MaxResult = expiry, optimistic, maxResult
	return &p
}

// run claims key and runs fn under it with proc and the lease rules of
// Config.
func (l *Ledger) run(ctx context.Context, proc *process.Processor, key, fingerprint string, fn func(context.Context) (effect.Output, error)) process.Result {
	h := process.Hooks{}
	if _, ok := lambdacontext.FromContext(ctx); ok {
		if deadline, has := ctx.Deadline(); has {
			// Inside a Lambda invocation the claim ends with the invocation:
			// a timed-out invocation leaves no lease behind for the retry.
			h = process.Hooks{LeaseUntil: deadline, CommitBy: deadline}
		}
	}
	return proc.Run(ctx, process.Call{Key: key, PayloadSHA256: fingerprint}, h, fn)
}

// verdict turns a result that did not apply the function into what the
// caller gets: the stored result of a duplicate, or an error.
func verdict(r process.Result) ([]byte, error) {
	switch {
	case r.Outcome == dedup.Duplicate:
		return r.Result, nil
	case r.Outcome == dedup.Conflict:
		return nil, fmt.Errorf("%w (key %q)", ErrPayloadMismatch, r.Key)
	case r.Outcome == dedup.Busy:
		return nil, &InProgressError{Key: r.Key, RetryAfter: retryHint(r.HeldFor, r.After)}
	case r.Err != nil:
		return nil, r.Err
	}
	return nil, fmt.Errorf("idempotency: key %q: unexpected outcome %v", r.Key, r.Outcome)
}

// hashOf is the hex SHA-256 of b.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
