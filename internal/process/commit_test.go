package process_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
)

// fault is what faultDB does to one call.
type fault int

const (
	pass         fault = iota
	failBefore         // a 5xx after the SDK's retries: nothing applied
	loseResponse       // applied, then the response is lost
	txConflict         // TransactionCanceledException, reasons TransactionConflict
	txValidation       // TransactionCanceledException, a ValidationError reason
)

// faultDB is the in-memory DynamoDB with faults per kind of ledger call:
// "claim" (PutItem), "complete" (UpdateItem to COMPLETED), "lease" (extend
// or release), "tx" (TransactWriteItems). Each kind takes its faults in
// order; failUntil fails every call of a kind until a (virtual) time.
type faultDB struct {
	*memdynamo.DB
	mu        sync.Mutex
	faults    map[string][]fault
	failUntil map[string]time.Time
	delay     map[string]time.Duration
	calls     map[string]int
}

func newFaultDB(db *memdynamo.DB) *faultDB {
	return &faultDB{DB: db, faults: map[string][]fault{}, failUntil: map[string]time.Time{}, delay: map[string]time.Duration{}, calls: map[string]int{}}
}

func (f *faultDB) inject(kind string, fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind] = append(f.faults[kind], fs...)
}

func (f *faultDB) clear(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.faults, kind)
}

func (f *faultDB) failUntilTime(kind string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failUntil[kind] = t
}

// slow delays every call of a kind by d before it reaches the table (a
// request stuck in a congested network or a long SDK retry).
func (f *faultDB) slow(kind string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay[kind] = d
}

func (f *faultDB) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

func (f *faultDB) next(kind string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind]++
	if time.Now().Before(f.failUntil[kind]) {
		return failBefore
	}
	q := f.faults[kind]
	if len(q) == 0 {
		return pass
	}
	f.faults[kind] = q[1:]
	return q[0]
}

var errServer = &smithy.GenericAPIError{Code: "InternalServerError", Message: "injected", Fault: smithy.FaultServer}

func cancelled(n int, code string) error {
	rs := make([]types.CancellationReason, n)
	for i := range rs {
		rs[i].Code = aws.String("None")
	}
	rs[n-1].Code = aws.String(code)
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: rs}
}

func do[T any](f *faultDB, kind string, call func() (T, error)) (T, error) {
	var zero T
	next := f.next(kind)
	f.mu.Lock()
	d := f.delay[kind]
	f.mu.Unlock()
	time.Sleep(d)
	switch next {
	case failBefore:
		return zero, errServer
	case loseResponse:
		if _, err := call(); err != nil {
			return zero, err
		}
		return zero, errServer
	}
	return call()
}

func (f *faultDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(f, "claim", func() (*dynamodb.PutItemOutput, error) { return f.DB.PutItem(ctx, in, o...) })
}

func (f *faultDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	kind := "lease"
	if strings.Contains(aws.ToString(in.UpdateExpression), ":done") {
		kind = "complete"
	}
	return do(f, kind, func() (*dynamodb.UpdateItemOutput, error) { return f.DB.UpdateItem(ctx, in, o...) })
}

func (f *faultDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	next := f.next("tx")
	f.mu.Lock()
	d := f.delay["tx"]
	f.mu.Unlock()
	time.Sleep(d)
	switch next {
	case failBefore:
		return nil, errServer
	case loseResponse:
		if _, err := f.DB.TransactWriteItems(ctx, in, o...); err != nil {
			return nil, err
		}
		return nil, errServer
	case txConflict:
		return nil, cancelled(len(in.TransactItems), "TransactionConflict")
	case txValidation:
		return nil, cancelled(len(in.TransactItems), "ValidationError")
	}
	return f.DB.TransactWriteItems(ctx, in, o...)
}

// withFaults puts a faultDB between b's processor and its table.
func withFaults(t *testing.T, b *bundle) *faultDB {
	t.Helper()
	f := newFaultDB(b.db)
	b.store = dedup.NewStore(f, "dedup")
	b.proc.Store = b.store
	return f
}

// modes runs a test in claim mode (an outside effect) and in transactional
// mode (the ledger's writes commit with the record).
func modes(t *testing.T, test func(t *testing.T, b *bundle, commit string)) {
	t.Helper()
	for _, mode := range []string{"claim", "tx"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setup(t)
				if mode == "tx" {
					ledger := &builtin.Ledger{Table: "ledger"}
					b.effect = ledger.Apply
				}
				commit := "complete"
				if mode == "tx" {
					commit = "tx"
				}
				test(t, b, commit)
			})
		})
	}
}

const deposit = `{"account":"a1","amount_cents":250,"seq":1}`

// requireAppliedOnce checks the outcome of a commit that succeeded: the
// effect ran once, the record is COMPLETED, and in transactional mode the
// ledger holds one deposit.
func requireAppliedOnce(t *testing.T, b *bundle, r process.Result, commit string) {
	t.Helper()
	require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
	require.True(t, r.Applied)
	require.EqualValues(t, 1, b.calls.Load(), "the effect ran once")
	require.Equal(t, "COMPLETED", b.record(t, r.Key)["status"].(*types.AttributeValueMemberS).Value)
	if commit == "tx" {
		require.Equal(t, "250", b.account(t, "a1")["balance_cents"].(*types.AttributeValueMemberN).Value)
	}
}

// TestCommitErrorKeepsTheClaim: a commit that fails without a verdict (a 5xx
// after the SDK's retries) is retried with the same claim. Before, the claim
// was dropped, the retry found it busy, and the redelivery ran the effect a
// second time.
func TestCommitErrorKeepsTheClaim(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.inject(commit, failBefore, failBefore, failBefore)
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		requireAppliedOnce(t, b, r, commit)
		require.Equal(t, 4, f.count(commit))
	})
}

// TestCommitLostResponseIsRecognised: the commit took effect and its response
// was lost; the retry recognises its own commit by the claim's token.
func TestCommitLostResponseIsRecognised(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.inject(commit, loseResponse)
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		requireAppliedOnce(t, b, r, commit)
	})
}

// TestTransactionConflictIsRetriedPromptly: DynamoDB cancels a transaction
// that meets another on one of its items (deposits to one hot account), and
// the SDK does not retry it. It costs milliseconds, not a lease.
func TestTransactionConflictIsRetriedPromptly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.effect = (&builtin.Ledger{Table: "ledger"}).Apply
		f := withFaults(t, b)
		f.inject("tx", txConflict, txConflict, txConflict)
		start := time.Now()
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		requireAppliedOnce(t, b, r, "tx")
		require.Less(t, time.Since(start), 500*time.Millisecond)
	})
}

// TestCommitOutlastsTheLease: DynamoDB refuses the commit for three leases;
// the heartbeat keeps the claim alive meanwhile, so no other worker takes the
// message over, and the commit goes through in the end.
func TestCommitOutlastsTheLease(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.failUntilTime(commit, time.Now().Add(30*time.Second))
		done := make(chan process.Result)
		go func() { done <- b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{}) }()
		time.Sleep(25 * time.Second) // two and a half leases
		other := setup(t)
		other.db, other.store = b.db, dedup.NewStore(b.db, "dedup")
		other.proc.Store = other.store
		ro := other.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, dedup.Busy, ro.Outcome, "the claim is alive")
		require.Zero(t, other.calls.Load())
		requireAppliedOnce(t, b, <-done, commit)
	})
}

// TestCommitGivesUpAndReleases: a commit that cannot get through within the
// commit timeout gives the claim up, so that the next delivery claims at once.
// Transactional mode has applied nothing.
func TestCommitGivesUpAndReleases(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.failUntilTime(commit, time.Now().Add(time.Hour))
		start := time.Now()
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, process.Retry, r.Action)
		require.ErrorIs(t, r.Err, errServer)
		require.False(t, r.Applied)
		took := time.Since(start)
		// Retries back off up to 5 s and stop when the next would pass the timeout.
		require.Greater(t, took, process.DefaultCommitTimeout-6*time.Second)
		require.LessOrEqual(t, took, process.DefaultCommitTimeout)
		rec := b.record(t, r.Key)
		require.Equal(t, "IN_PROGRESS", rec["status"].(*types.AttributeValueMemberS).Value)
		require.Equal(t, "0", rec["lease_until"].(*types.AttributeValueMemberN).Value, "released")
		if commit == "tx" {
			require.Empty(t, b.account(t, "a1"), "nothing applied")
		}
	})
}

// TestForcedStopEndsCommitRetries: a cancelled context (a forced shutdown)
// stops the retries at once; the claim is released.
func TestForcedStopEndsCommitRetries(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.failUntilTime(commit, time.Now().Add(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		r := b.proc.Process(ctx, msg("1", deposit), process.Hooks{})
		require.Equal(t, process.Retry, r.Action)
		require.Less(t, time.Since(start), 6*time.Second)
		require.Equal(t, "0", b.record(t, r.Key)["lease_until"].(*types.AttributeValueMemberN).Value, "released")
	})
}

// TestForcedStopTriesTheCommitOnce: a forced stop (Worker.StopAndCancel)
// after the effect finished still makes one commit attempt, so that the
// effect is recorded; when that attempt fails for a passing reason the
// commit is not retried and the claim is released: the next delivery runs
// the effect again (DESIGN.md's first window, as for a shutdown that cuts
// a running effect).
func TestForcedStopTriesTheCommitOnce(t *testing.T) {
	t.Parallel()
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprint("fails=", fails), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setup(t)
				f := withFaults(t, b)
				if fails {
					f.inject("complete", failBefore)
				}
				ctx, cancel := context.WithCancel(context.Background())
				b.effect = func(context.Context, effect.Input) (effect.Output, error) {
					cancel() // the stop comes as the effect finishes
					return effect.Output{Result: []byte("ok")}, nil
				}
				r := b.proc.Process(ctx, msg("1", "x"), process.Hooks{})
				require.Equal(t, 1, f.count("complete"), "one commit attempt")
				rec := b.record(t, r.Key)
				if !fails {
					require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
					require.Equal(t, "COMPLETED", rec["status"].(*types.AttributeValueMemberS).Value)
					return
				}
				require.Equal(t, process.Retry, r.Action)
				require.ErrorIs(t, r.Err, errServer)
				require.Equal(t, "IN_PROGRESS", rec["status"].(*types.AttributeValueMemberS).Value)
				require.Equal(t, "0", rec["lease_until"].(*types.AttributeValueMemberN).Value, "released")
			})
		})
	}
}

// TestCommitByBoundsRetries: Lambda's commit must end before the invocation's
// deadline.
func TestCommitByBoundsRetries(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		f.failUntilTime(commit, time.Now().Add(time.Hour))
		by := time.Now().Add(3 * time.Second)
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{CommitBy: by, LeaseUntil: time.Now().Add(2 * time.Second)})
		require.Equal(t, process.Retry, r.Action)
		require.False(t, time.Now().After(by))
	})
}

// TestCommitRetriesPastTheLeaseUntilCommitBy: on Lambda the message's context
// ends with its lease (the deadline less LeaseMargin), and CommitBy is later
// (the deadline less a quarter of the margin). The commit of an effect that
// finished is retried until CommitBy, not until the context's deadline: an
// outage that heals between the two commits it, instead of releasing the
// claim for the next delivery to run the effect again.
func TestCommitRetriesPastTheLeaseUntilCommitBy(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, b *bundle, commit string) {
		f := withFaults(t, b)
		lease := time.Now().Add(20 * time.Second)
		by := lease.Add(6 * time.Second)
		f.failUntilTime(commit, lease.Add(time.Second))
		ctx, cancel := context.WithDeadline(context.Background(), lease)
		defer cancel()
		r := b.proc.Process(ctx, msg("1", deposit), process.Hooks{CommitBy: by, LeaseUntil: lease})
		require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		require.True(t, r.Applied)
		require.False(t, time.Now().After(by))
		require.EqualValues(t, 1, b.calls.Load(), "the effect ran once")
	})
}

// TestClaimLostResponseIsOurs: the claim's put took effect and its response
// was lost. The claim is retried with the same token and recognised as ours,
// instead of leaving the worker busy with its own claim for a whole lease.
func TestClaimLostResponseIsOurs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		f := withFaults(t, b)
		f.inject("claim", loseResponse, failBefore)
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		require.Equal(t, dedup.Won, r.Outcome)
		require.EqualValues(t, 1, b.calls.Load())
	})
}

// TestClaimThatFailsIsReleased: when the claim cannot be confirmed at all, a
// put that did take effect is released, so the next delivery is not kept
// waiting by this worker's own lease.
func TestClaimThatFailsIsReleased(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		f := withFaults(t, b)
		f.inject("claim", loseResponse, failBefore, failBefore, failBefore, failBefore, failBefore, failBefore, failBefore)
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		require.ErrorIs(t, r.Err, errServer)
		requireHandedBackThenRunsOnce(t, b, r, func() { f.clear("claim") })
	})
}

// requireHandedBackThenRunsOnce checks a claim given back before the effect
// started: Retry, the effect not run; once heal has removed the fault, the
// next delivery claims at once and runs the effect once.
func requireHandedBackThenRunsOnce(t *testing.T, b *bundle, r process.Result, heal func()) {
	t.Helper()
	require.Equal(t, process.Retry, r.Action)
	require.Error(t, r.Err)
	require.Zero(t, b.calls.Load(), "the effect did not start")
	heal()
	r = b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
	require.Equal(t, process.Delete, r.Action, "the next delivery claims at once: %v", r.Err)
	require.EqualValues(t, 1, b.calls.Load())
}

// TestValidationErrorIsPermanent: DynamoDB rejecting the commit as invalid
// (an effect that writes one item twice, or a ValidationError cancellation
// reason) is permanent: retrying cannot help and would spend a lease a cycle.
func TestValidationErrorIsPermanent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		twice := func(ctx context.Context, in effect.Input) (effect.Output, error) {
			out, err := (&builtin.Ledger{Table: "ledger"}).Apply(ctx, in)
			out.Writes = append(out.Writes, out.Writes[0])
			return out, err
		}
		b.effect = twice
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, process.Fail, r.Action, "err: %v", r.Err)
		require.True(t, effect.IsPermanent(r.Err))
		require.Equal(t, "0", b.record(t, r.Key)["lease_until"].(*types.AttributeValueMemberN).Value, "released")

		b.effect = (&builtin.Ledger{Table: "ledger"}).Apply
		f := withFaults(t, b)
		f.inject("tx", txValidation)
		r = b.proc.Process(context.Background(), msg("2", `{"account":"a2","amount_cents":1,"seq":1}`), process.Hooks{})
		require.Equal(t, process.Fail, r.Action, "err: %v", r.Err)
		require.True(t, effect.IsPermanent(r.Err))
		require.Equal(t, 1, f.count("tx"), "not retried")
	})
}

// TestSlowClaimDoesNotStartTheEffect: the claim's put reached DynamoDB late
// (here after its whole lease, then after most of it): the worker won a
// lease that has ended or is about to, and another worker may claim the key
// at any moment. The effect is not started on it; the claim is released and
// the message retried. Before, the effect ran on the dead lease.
func TestSlowClaimDoesNotStartTheEffect(t *testing.T) {
	t.Parallel()
	for _, late := range []time.Duration{12 * time.Second, 6 * time.Second} {
		t.Run(late.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setup(t) // lease 10 s
				f := withFaults(t, b)
				f.slow("claim", late)
				r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
				require.Equal(t, "0", b.record(t, r.Key)["lease_until"].(*types.AttributeValueMemberN).Value, "released")
				requireHandedBackThenRunsOnce(t, b, r, func() { f.slow("claim", 0) })
			})
		})
	}
}

// TestLateClaimExtendsAtOnce: a claim that answered with a little less than
// half its lease left still runs, but its first heartbeat comes when half the
// lease is left, counted from the claim, not a full interval after the
// answer (when the lease would have ended).
func TestLateClaimExtendsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t) // lease 10 s, heartbeat every 5 s
		f := withFaults(t, b)
		f.slow("claim", 4*time.Second)
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) }) // also when a check fails
		b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
			<-release
			return effect.Output{}, nil
		}
		done := make(chan process.Result, 1)
		go func() { done <- b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{}) }()
		time.Sleep(7 * time.Second) // 3 s after the answer: the claim's lease had 6 s
		synctest.Wait()
		lu := b.record(t, "t#q.fifo#d-1")["lease_until"].(*types.AttributeValueMemberN).Value
		require.Greater(t, lu, fmt.Sprint(time.Now().Add(5*time.Second).UnixMilli()), "extended at 5 s left")
		time.Sleep(10 * time.Second)
		c, err := b.store.Claim(context.Background(), dedup.ClaimRequest{Key: "t#q.fifo#d-1", PayloadSHA256: dedup.PayloadHash("x"), Lease: time.Second, TTL: time.Hour})
		require.NoError(t, err)
		require.Equal(t, dedup.Busy, c.Outcome, "the lease is alive")
		once.Do(func() { close(release) })
		require.Equal(t, process.Delete, (<-done).Action)
	})
}

// TestHungHeartbeatCancelsTheEffectAtTheLeaseEnd: the heartbeat's extension
// hangs (a request stuck past the lease) while the effect runs. The effect's
// context is cancelled by the time the confirmed lease ends, so an effect
// that checks it before an outside call makes no call on a lease another
// worker may hold by then. Before, nothing cancelled it: a stalled effect
// woke up and called the downstream after the takeover.
func TestHungHeartbeatCancelsTheEffectAtTheLeaseEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t) // lease 10 s, heartbeat every 5 s
		f := withFaults(t, b)
		f.slow("lease", time.Hour)
		start := time.Now()
		var cancelledAt time.Duration
		b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
			select {
			case <-ctx.Done():
				cancelledAt = time.Since(start)
				return effect.Output{}, context.Cause(ctx)
			case <-time.After(time.Minute):
				return effect.Output{}, nil
			}
		}
		r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
		require.Equal(t, process.Retry, r.Action)
		require.ErrorIs(t, r.Err, process.ErrLeaseExpired)
		require.NotZero(t, cancelledAt)
		require.LessOrEqual(t, cancelledAt, 10*time.Second, "cancelled by the lease's end")
		require.Greater(t, cancelledAt, 8*time.Second, "not long before it")
		f.slow("lease", 0)
	})
}

// TestNoExtensionAfterTheHeartbeatStopped: the effect fails while the
// heartbeat's extension is slow, and its next interval ends before that
// extension answers. When it answers, the heartbeat has been stopped and
// its timer has fired: it must not extend again (select picked either at
// random: an extension after the stop in about half the runs, which made
// a simulation run that did not replay).
func TestNoExtensionAfterTheHeartbeatStopped(t *testing.T) {
	t.Parallel()
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			b := setup(t) // lease 10 s, heartbeat every 5 s
			f := withFaults(t, b)
			f.slow("lease", 7*time.Second) // the extension at 5 s answers at 12 s; the next is due at 10 s
			b.effect = func(ctx context.Context, in effect.Input) (effect.Output, error) {
				time.Sleep(6 * time.Second)
				return effect.Output{}, errors.New("downstream down")
			}
			r := b.proc.Process(context.Background(), msg("1", "x"), process.Hooks{})
			require.Equal(t, process.Retry, r.Action)
			require.Equal(t, 2, f.count("lease"), "one extension, then the release; none after the stop")
		})
	}
}
