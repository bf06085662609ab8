package exactly_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// writeCounter counts the ledger's writes by operation.
type writeCounter struct {
	*memdynamo.DB
	mu    sync.Mutex
	calls map[string]int
}

func (c *writeCounter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
}

func (c *writeCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.add("PutItem")
	return c.DB.PutItem(ctx, in, o...)
}

func (c *writeCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add("UpdateItem")
	return c.DB.UpdateItem(ctx, in, o...)
}

func (c *writeCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.add("TransactWriteItems")
	return c.DB.TransactWriteItems(ctx, in, o...)
}

// TestCommitModes: an effect that declares its whole effect is its writes
// commits optimistically by default, one DynamoDB request per message
// (PutItem, no claim, no complete); Commit: claim claims and completes; a
// mode the effect cannot have is a ConfigError naming Config.Commit.
func TestCommitModes(t *testing.T) {
	t.Parallel()
	writesOnly := effect.WritesFunc(func(context.Context, effect.Input) (effect.Output, error) { return effect.Output{}, nil })
	for _, tc := range []struct {
		commit exactly.CommitMode
		group  time.Duration
		want   map[string]int // per message, after the start-up preflight
	}{
		// Grouped: the 20 messages arrive at once, four groups in parallel,
		// each effect taking 1ms (a group goes once every message under way
		// has joined: instant effects would each find none other under
		// way); their commits share transactions: fewer requests than
		// messages.
		{"", 10 * time.Millisecond, nil},
		{"", 0, map[string]int{"PutItem": 1}},
		{exactly.CommitOptimistic, 0, map[string]int{"PutItem": 1}},
		{exactly.CommitTransactional, 0, map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{exactly.CommitClaim, 0, map[string]int{"PutItem": 1, "UpdateItem": 1}},
	} {
		t.Run(fmt.Sprint(tc.commit, tc.group), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := memsqs.New()
				url, _ := memsqs.NewQueue(t, c, true, nil, 5)
				db := &writeCounter{DB: memTable(t), calls: map[string]int{}}
				eff := writesOnly
				if tc.group > 0 {
					eff = effect.WritesFunc(func(context.Context, effect.Input) (effect.Output, error) {
						time.Sleep(time.Millisecond)
						return effect.Output{}, nil
					})
				}
				w, err := exactly.New(context.Background(), exactly.Config{
					SQS: c, DynamoDB: db, Table: "dedup", Queues: []string{url}, Effect: eff,
					Commit: tc.commit, GroupCommit: tc.group, WaitTime: time.Second,
				})
				require.NoError(t, err)
				db.mu.Lock()
				clear(db.calls) // the preflight's probes
				db.mu.Unlock()
				const n = 20
				sendAndRun(t, c, url, w, n, 4)
				require.EqualValues(t, n, w.Stats().Applied)
				if tc.group > 0 {
					require.Less(t, db.calls["TransactWriteItems"]+db.calls["PutItem"], n, "%v", db.calls)
					require.Positive(t, db.calls["TransactWriteItems"], "%v", db.calls)
					require.Zero(t, db.calls["UpdateItem"])
					return
				}
				want := map[string]int{}
				for op, k := range tc.want {
					want[op] = k * n
				}
				require.Equal(t, want, db.calls)
			})
		})
	}

	cfg := exactly.Config{SQS: memsqs.New(), DynamoDB: memTable(t), Table: "dedup", Effect: &counted{},
		Queues: []string{"https://sqs.eu-west-1.amazonaws.com/1/q.fifo"}}
	for _, mode := range []exactly.CommitMode{exactly.CommitOptimistic, exactly.CommitTransactional, exactly.CommitCarried, "fast"} {
		cfg.Commit = mode
		_, err := exactly.New(context.Background(), cfg)
		var ce *exactly.ConfigError
		require.ErrorAs(t, err, &ce, mode)
		require.Equal(t, "Commit", ce.Setting)
	}
	cfg.Commit = "fast"
	require.ErrorContains(t, cfg.Validate(), "want claim, transactional, optimistic or carried")
	// Carried mode has no group commit.
	cfg.Effect, cfg.Commit, cfg.GroupCommit = &builtin.Ledger{Table: "dedup"}, exactly.CommitCarried, 5*time.Millisecond
	var ce *exactly.ConfigError
	_, err := exactly.New(context.Background(), cfg)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "GroupCommit", ce.Setting)
}

// TestCarriedCommitMode: the ledger in carried mode costs one
// TransactWriteItems of its own two writes per message, 4 write units: no
// record item, no claim.
func TestCarriedCommitMode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		db := &writeCounter{DB: memTable(t), calls: map[string]int{}}
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: db, Table: "dedup", Queues: []string{url}, Effect: &builtin.Ledger{Table: "dedup"},
			Commit: exactly.CommitCarried, WaitTime: time.Second,
		})
		require.NoError(t, err)
		db.mu.Lock()
		clear(db.calls) // the preflight's probes
		db.mu.Unlock()
		units := db.WriteUnits()
		const n = 20
		sendBodiesAndRun(t, c, url, w, n, 4, func(i int) string { return fmt.Sprintf(`{"account":"a%d","amount_cents":5}`, i%4) })
		require.EqualValues(t, n, w.Stats().Applied)
		require.Equal(t, map[string]int{"TransactWriteItems": n}, db.calls)
		require.Equal(t, 4*n, db.WriteUnits()-units)
	})
}

func ptr[T any](v T) *T { return &v }

// sendAndRun sends n messages over groups FIFO groups, runs w for a
// (virtual) minute and drains it. Inside a synctest bubble.
func sendAndRun(t *testing.T, c *memsqs.Server, url string, w *exactly.Worker, n, groups int) {
	t.Helper()
	sendBodiesAndRun(t, c, url, w, n, groups, func(i int) string { return fmt.Sprint("m", i) })
}

// sendBodiesAndRun is sendAndRun with message i's body body(i).
func sendBodiesAndRun(t *testing.T, c *memsqs.Server, url string, w *exactly.Worker, n, groups int, body func(i int) string) {
	t.Helper()
	for i := range n {
		_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url,
			MessageBody: ptr(body(i)), MessageGroupId: ptr(fmt.Sprint("g", i%groups)), MessageDeduplicationId: ptr(fmt.Sprint("d", i))})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	time.Sleep(time.Minute)
	cancel()
	require.NoError(t, <-done)
}

// TestWorkerTraces: Config.TracerProvider gives each message a span.
func TestWorkerTraces(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		rec := tracetest.NewSpanRecorder()
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: builtin.Noop{},
			WaitTime: time.Second, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		})
		require.NoError(t, err)
		sendAndRun(t, c, url, w, 3, 1)
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == "process "+sqsmsg.QueueName(url) {
				n++
			}
		}
		require.Equal(t, 3, n)
	})
}
