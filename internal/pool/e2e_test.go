package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// ledgerRig is the whole path against the local stack: a FIFO queue on
// fauxqs, the dedup ledger and the ledger effect's table on DynamoDB Local.
type ledgerRig struct {
	sqs    *sqs.Client
	db     *dynamodb.Client
	url    string
	ledger string
	proc   *process.Processor
	obs    *countingObserver
	logs   *syncBuffer
}

func newLedgerRig(t *testing.T, wrap func(effect.Effect) effect.Effect) *ledgerRig {
	t.Helper()
	r := &ledgerRig{sqs: testenv.SQS(t), db: testenv.DynamoDB(t), obs: newCountingObserver(), logs: &syncBuffer{}}
	r.url, _ = testenv.NewQueue(t, r.sqs, true, nil, 0)
	dedupTable := testenv.NewTable(t, r.db, true)
	r.ledger = testenv.NewTable(t, r.db, false)
	var eff effect.Effect = &builtin.Ledger{Table: r.ledger}
	if wrap != nil {
		eff = wrap(eff)
	}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r.proc = &process.Processor{
		Store: dedup.NewStore(r.db, dedupTable), Effect: eff, Log: log,
		Scope: func(effect.Message) dedup.Scope { return dedup.Scope{Namespace: "e2e", Queue: sqsmsg.QueueName(r.url)} },
		Lease: 30 * time.Second, TTL: time.Hour,
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *ledgerRig) pool(t *testing.T, concurrency int, visibility time.Duration, edit ...func(*Config)) *Pool {
	t.Helper()
	cfg := Config{
		Client: r.sqs, Processor: r.proc, Concurrency: concurrency,
		Queues:   []Queue{{URL: r.url, FIFO: true, Visibility: visibility, Receivers: 4}},
		WaitTime: time.Second, RetryBase: 10 * time.Millisecond, RetryMax: 10 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second, Observer: r.obs,
		Log: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := New(cfg)
	require.NoError(t, err)
	return p
}

func groupName(g int) string { return fmt.Sprintf("acct-%02d", g) }

// send sends perGroup ledger entries to each of groups accounts, seq 1..n
// in order per group, amount = seq cents; groups are sent concurrently.
func (r *ledgerRig) send(t *testing.T, groups, perGroup int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	sem := make(chan struct{}, 8)
	for g := range groups {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			acct := groupName(g)
			for start := 1; start <= perGroup; start += 10 {
				var entries []types.SendMessageBatchRequestEntry
				for seq := start; seq < start+10 && seq <= perGroup; seq++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id:                     aws.String(strconv.Itoa(seq)),
						MessageBody:            aws.String(fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, seq, seq)),
						MessageGroupId:         aws.String(acct),
						MessageDeduplicationId: aws.String(fmt.Sprintf("%s-%03d", acct, seq)),
					})
				}
				out, err := r.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &r.url, Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("send: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// requireBalances checks every account: the sum of 1..perGroup cents,
// perGroup entries applied, the last seq perGroup.
func (r *ledgerRig) requireBalances(t *testing.T, groups, perGroup int) {
	t.Helper()
	for g := range groups {
		out, err := r.db.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: &r.ledger, ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "acct#" + groupName(g)}},
		})
		require.NoError(t, err)
		require.Equal(t, int64(perGroup*(perGroup+1)/2), num(out.Item["balance_cents"]), "balance of %s", groupName(g))
		require.Equal(t, int64(perGroup), num(out.Item["applied"]), "entries applied to %s", groupName(g))
		require.Equal(t, int64(perGroup), num(out.Item["last_seq"]), "last seq of %s", groupName(g))
	}
}

func (r *ledgerRig) queueCounts(t *testing.T) (visible, inflight int) {
	t.Helper()
	out, err := r.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &r.url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inflight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inflight
}

func (r *ledgerRig) requireQueueEmpty(t *testing.T) {
	t.Helper()
	v, nv := r.queueCounts(t)
	require.Zero(t, v+nv, "queue empty")
}

func num(v ddbtypes.AttributeValue) int64 {
	if n, ok := v.(*ddbtypes.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(n.Value, 10, 64)
		return i
	}
	return -1
}

// countingObserver counts outcomes and records, per group, the order in
// which entries were applied (from the dedup key's "<acct>-<seq>" suffix).
type countingObserver struct {
	nopObserver
	applied, duplicates, retries, failures atomic.Int64

	mu      sync.Mutex
	order   map[string][]int
	want    int64
	reached chan struct{}
}

func newCountingObserver() *countingObserver {
	return &countingObserver{order: map[string][]int{}, reached: make(chan struct{})}
}

// expect arms reached to close when n messages have been applied.
func (o *countingObserver) expect(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.want = int64(n)
	o.reached = make(chan struct{})
}

func (o *countingObserver) Done(_ string, r process.Result, _ time.Duration) {
	switch {
	case r.Action == process.Delete && r.Applied:
		n := o.applied.Add(1)
		key := r.Key[strings.LastIndexByte(r.Key, '#')+1:]
		i := strings.LastIndexByte(key, '-')
		acct := key[:max(i, 0)]
		s, _ := strconv.Atoi(key[i+1:])
		o.mu.Lock()
		o.order[acct] = append(o.order[acct], s)
		if n == o.want {
			close(o.reached)
		}
		o.mu.Unlock()
	case r.Action == process.Delete:
		o.duplicates.Add(1)
	case r.Action == process.Retry:
		o.retries.Add(1)
	default:
		o.failures.Add(1)
	}
}

func (o *countingObserver) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	o.mu.Lock()
	ch := o.reached
	o.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s: %d applied, %d duplicates, %d retries, %d failures",
			timeout, o.applied.Load(), o.duplicates.Load(), o.retries.Load(), o.failures.Load())
	}
}

func (o *countingObserver) requireInOrder(t *testing.T, groups, perGroup int) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	want := make([]int, perGroup)
	for i := range want {
		want[i] = i + 1
	}
	for g := range groups {
		require.Equal(t, want, o.order[groupName(g)], "entries of %s applied in order, once", groupName(g))
	}
}

func runPool(p *Pool) (cancel context.CancelFunc, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(ch)
	}()
	return cancel, ch
}

func TestEmulatorLedgerGroupsInOrder(t *testing.T) {
	t.Parallel()
	const groups, perGroup = 50, 100
	r := newLedgerRig(t, nil)
	r.send(t, groups, perGroup)
	r.obs.expect(groups * perGroup)
	start := time.Now()
	cancel, done := runPool(r.pool(t, 32, 30*time.Second))
	r.obs.wait(t, 5*time.Minute)
	took := time.Since(start)
	cancel()
	<-done

	t.Logf("%d messages in %s: %.0f msg/s", groups*perGroup, took.Round(time.Millisecond), float64(groups*perGroup)/took.Seconds())
	require.Zero(t, r.obs.failures.Load())
	r.obs.requireInOrder(t, groups, perGroup)
	r.requireBalances(t, groups, perGroup)
	r.requireQueueEmpty(t)
}

func TestEmulatorFailureHoldsBackItsGroup(t *testing.T) {
	t.Parallel()
	const groups, perGroup, failures = 4, 20, 2
	var failed atomic.Int32
	r := newLedgerRig(t, func(next effect.Effect) effect.Effect {
		return effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			if in.Message.DedupID == groupName(1)+"-010" && failed.Add(1) <= failures {
				return effect.Output{}, fmt.Errorf("downstream unavailable (%d)", failed.Load())
			}
			return next.Apply(ctx, in)
		})
	})
	r.send(t, groups, perGroup)
	r.obs.expect(groups * perGroup)
	cancel, done := runPool(r.pool(t, 8, 30*time.Second))
	r.obs.wait(t, 2*time.Minute)
	cancel()
	<-done

	require.Equal(t, int64(failures), r.obs.retries.Load(), "the failing entry was retried")
	require.Zero(t, r.obs.failures.Load())
	r.obs.requireInOrder(t, groups, perGroup) // 11..20 of acct-01 waited for 10
	r.requireBalances(t, groups, perGroup)
	r.requireQueueEmpty(t)
}

// TestEmulatorRetryInPlaceKeepsTheMessage: a message that fails for longer
// than the visibility timeout is retried in place, the keeper holding it
// hidden all along: it succeeds at its first receive, and its group follows
// in order.
func TestEmulatorRetryInPlaceKeepsTheMessage(t *testing.T) {
	t.Parallel()
	const groups, perGroup, failures = 3, 10, 3
	// 3 failures × 2.5 s > the 6 s visibility timeout, which the keeper
	// extends when less than half of it is left: 3 s of slack for a starved
	// machine.
	const delay = 2500 * time.Millisecond
	var failed atomic.Int32
	var countAtSuccess atomic.Int32
	r := newLedgerRig(t, func(next effect.Effect) effect.Effect {
		return effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			if in.Message.DedupID == groupName(1)+"-005" {
				if failed.Add(1) <= failures {
					return effect.Output{}, effect.RetryAfter(delay, fmt.Errorf("downstream unavailable (%d)", failed.Load()))
				}
				countAtSuccess.Store(int32(in.Message.ReceiveCount))
			}
			return next.Apply(ctx, in)
		})
	})
	r.send(t, groups, perGroup)
	r.obs.expect(groups * perGroup)
	cancel, done := runPool(r.pool(t, 8, 6*time.Second, func(c *Config) { c.RetryInPlace = failures; c.RetryMax = 5 * time.Second }))
	r.obs.wait(t, 2*time.Minute)
	cancel()
	<-done

	require.Equal(t, int64(failures), r.obs.retries.Load())
	require.EqualValues(t, 1, countAtSuccess.Load(), "never went back to SQS: received once")
	r.obs.requireInOrder(t, groups, perGroup)
	r.requireBalances(t, groups, perGroup)
	r.requireQueueEmpty(t)
}

func TestEmulatorShutdownUnderLoadThenRestart(t *testing.T) {
	t.Parallel()
	const groups, perGroup = 20, 50
	r := newLedgerRig(t, nil)
	r.send(t, groups, perGroup)

	const visibility = 30 * time.Second
	r.obs.expect(groups * perGroup / 3)
	cancel, done := runPool(r.pool(t, 32, visibility))
	r.obs.wait(t, 2*time.Minute)
	stopAt := time.Now()
	cancel() // SIGTERM
	select {
	case <-done:
	case <-time.After(10*time.Second + 5*time.Second):
		t.Fatal("the pool did not stop within its shutdown timeout")
	}
	stopped := time.Since(stopAt)
	first := r.obs.applied.Load()
	require.Less(t, first, int64(groups*perGroup), "stopped under load")
	t.Logf("stopped after %d of %d in %s", first, groups*perGroup, stopped.Round(time.Millisecond))
	// Were a long poll cancelled at shutdown, SQS (and fauxqs) would still
	// hand it messages that nobody gets, their groups blocked for the
	// visibility timeout. Everything the pool held is deleted or visible.
	_, inflight := r.queueCounts(t)
	require.Zero(t, inflight, "no message left in flight by the stopped pool")

	r.obs.expect(groups * perGroup)
	restart := time.Now()
	cancel, done = runPool(r.pool(t, 32, visibility))
	r.obs.wait(t, 5*time.Minute)
	cancel()
	<-done
	t.Logf("restart finished the rest in %s (%d duplicates)", time.Since(restart).Round(time.Millisecond), r.obs.duplicates.Load())

	require.Zero(t, r.obs.failures.Load())
	require.Equal(t, int64(groups*perGroup), r.obs.applied.Load(), "nothing lost, nothing applied twice")
	r.obs.requireInOrder(t, groups, perGroup)
	r.requireBalances(t, groups, perGroup)
	r.requireQueueEmpty(t)
}
