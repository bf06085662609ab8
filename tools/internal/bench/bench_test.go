package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/process"
)

// memGroups is the number of FIFO message groups of the in-memory workload.
// memsqs scans every group on a FIFO receive, so a group per message would
// make the fake, not the pool, the cost.
const memGroups = 64

// BenchmarkPoolLedger runs b.N messages through the whole in-memory path:
// pool (memsqs FIFO queue) -> processor -> dedup ledger (memdynamo) -> effect
// -> batched delete. One op is one message, so allocs/op is allocations per
// message (the fakes' included: see raw-allocs/msg for theirs alone).
//
// Throughput is reported as a ratio to a raw baseline measured in the same
// benchmark on the same machine: one goroutine draining the same number of
// messages from memsqs with ReceiveMessage(10) + DeleteMessageBatch and
// nothing else, timed once before and once after the pool (their mean).
// receives/msg, delete-batches/msg and visibility-batches/msg count the
// pool's SQS requests per message. p50/p99 are the processor's time per message (claim, effect,
// commit), as the pool's observer sees it.
func BenchmarkPoolLedger(b *testing.B) {
	for _, eff := range []string{"ledger", "noop"} {
		for _, c := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("effect=%s/concurrency=%d", eff, c), func(b *testing.B) { benchPool(b, eff, c) })
		}
	}
}

func benchPool(b *testing.B, effName string, concurrency int) {
	b.StopTimer()
	ctx := context.Background()
	srv := memsqs.New()
	db := memdynamo.New()
	url := memQueue(b, srv, "pool")
	memTable(b, db, "dedup")
	memTable(b, db, "ledger")
	memFill(b, srv, url, b.N)

	var eff effect.Effect = builtin.Noop{}
	if effName == "ledger" {
		eff = &builtin.Ledger{Table: "ledger"}
	}
	keys, err := dedup.ParseKeySource("auto")
	if err != nil {
		b.Fatal(err)
	}
	proc := &process.Processor{
		Store: dedup.NewStore(db, "dedup"), Effect: eff, Keys: keys,
		TTL: time.Hour, Lease: 30 * time.Second, Log: slog.New(slog.DiscardHandler),
		Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "bench", Queue: m.QueueName} },
	}
	obs := newCollector(b.N)
	client := &countingSQS{SQS: srv}
	p, err := pool.New(pool.Config{
		Client: client, Processor: proc, Concurrency: concurrency, WaitTime: time.Second, Observer: obs,
		Queues: []pool.Queue{{URL: url, FIFO: true, Visibility: 30 * time.Second}},
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	rawBefore, allocsBefore := rawDrain(b, srv, b.N)

	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	b.StartTimer()
	start := time.Now()
	go func() { p.Run(runCtx); done <- nil }()
	select {
	case <-obs.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d messages done after 5 minutes", obs.n.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if f := obs.failed.Load(); f > 0 {
		b.Fatalf("%d messages were not applied", f)
	}

	rawAfter, allocsAfter := rawDrain(b, srv, b.N)
	raw := (rawBefore + rawAfter) / 2
	rawAllocs := (allocsBefore + allocsAfter) / 2
	rate := float64(b.N) / elapsed.Seconds()
	rawRate := float64(b.N) / raw.Seconds()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(rawRate, "raw-msgs/s")
	b.ReportMetric(rate/rawRate, "x-raw")
	b.ReportMetric(rawAllocs, "raw-allocs/msg")
	b.ReportMetric(float64(client.receives.Load())/float64(b.N), "receives/msg")
	b.ReportMetric(float64(client.deletes.Load())/float64(b.N), "delete-batches/msg")
	b.ReportMetric(float64(client.changes.Load())/float64(b.N), "visibility-batches/msg")
	p50, p99 := obs.percentiles()
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
}

// BenchmarkProcessor runs the processor alone (key, claim, effect, commit on
// memdynamo) on one goroutine, without SQS or the pool: with
// BenchmarkPoolLedger and raw-allocs/msg it splits a message's allocations
// between the ledger path, the fake SQS and the pool.
func BenchmarkProcessor(b *testing.B) {
	for _, effName := range []string{"ledger", "noop"} {
		b.Run("effect="+effName, func(b *testing.B) {
			db := memdynamo.New()
			memTable(b, db, "dedup")
			memTable(b, db, "ledger")
			var eff effect.Effect = builtin.Noop{}
			if effName == "ledger" {
				eff = &builtin.Ledger{Table: "ledger"}
			}
			keys, err := dedup.ParseKeySource("auto")
			if err != nil {
				b.Fatal(err)
			}
			proc := &process.Processor{
				Store: dedup.NewStore(db, "dedup"), Effect: eff, Keys: keys,
				TTL: time.Hour, Lease: 30 * time.Second, Log: slog.New(slog.DiscardHandler),
				Scope: func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "bench", Queue: m.QueueName} },
			}
			w := Workload(b.N, memGroups)
			msgs := make([]effect.Message, b.N)
			for i := range msgs {
				e := w.Entry(i)
				msgs[i] = effect.Message{
					QueueURL: "http://localhost/000000000000/q.fifo", QueueName: "q.fifo", ID: fmt.Sprint(i),
					Body: aws.ToString(e.MessageBody), Group: aws.ToString(e.MessageGroupId),
					DedupID: aws.ToString(e.MessageDeduplicationId), ReceiveCount: 1,
				}
			}
			hooks := process.Hooks{HeartbeatEvery: 15 * time.Second, Lease: 30 * time.Second}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if r := proc.Process(ctx, msgs[i], hooks); !r.Applied {
					b.Fatalf("message %d: %s: %v", i, r.Action, r.Err)
				}
			}
		})
	}
}

// rawDrain fills a new queue with n messages and drains it from one
// goroutine with ReceiveMessage(10) + DeleteMessageBatch: the cost of moving
// messages through memsqs alone. It returns the drain time and its
// allocations per message.
func rawDrain(b *testing.B, srv *memsqs.Server, n int) (time.Duration, float64) {
	b.Helper()
	ctx := context.Background()
	url := memQueue(b, srv, "raw")
	memFill(b, srv, url, n)
	runtime.GC()
	var before, after runtimeMem
	before.read()
	start := time.Now()
	got := 0
	for got < n {
		out, err := srv.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Messages) == 0 {
			b.Fatalf("raw drain: queue empty after %d of %d", got, n)
		}
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
		}
		if _, err := srv.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries}); err != nil {
			b.Fatal(err)
		}
		got += len(out.Messages)
	}
	elapsed := time.Since(start)
	after.read()
	return elapsed, float64(after.mallocs-before.mallocs) / float64(n)
}

var queueSeq atomic.Int64

func memQueue(b *testing.B, srv *memsqs.Server, prefix string) string {
	b.Helper()
	name := fmt.Sprintf("%s-%d.fifo", prefix, queueSeq.Add(1))
	out, err := srv.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: &name, Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"},
	})
	if err != nil {
		b.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func memTable(b *testing.B, db *memdynamo.DB, name string) {
	b.Helper()
	_, err := db.CreateTable(context.Background(), keyedTableInput(name))
	if err != nil {
		b.Fatal(err)
	}
}

// memFill sends n ledger messages over memGroups groups, in per-group order.
func memFill(b *testing.B, srv *memsqs.Server, url string, n int) {
	b.Helper()
	for _, batch := range Workload(n, memGroups).Batches() {
		out, err := srv.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: batch})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Failed) > 0 {
			b.Fatalf("send: %s", aws.ToString(out.Failed[0].Message))
		}
	}
}

// countingSQS counts the pool's SQS requests.
type countingSQS struct {
	pool.SQS
	receives, deletes, changes atomic.Int64
}

func (c *countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receives.Add(1)
	return c.SQS.ReceiveMessage(ctx, in, opts...)
}

func (c *countingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.deletes.Add(1)
	return c.SQS.DeleteMessageBatch(ctx, in, opts...)
}

func (c *countingSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.changes.Add(1)
	return c.SQS.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

// collector is the pool's observer: it counts messages done and keeps the
// processor's time per message.
type collector struct {
	target int64
	n      atomic.Int64
	failed atomic.Int64
	all    chan struct{}

	mu   sync.Mutex
	took []time.Duration
}

func newCollector(target int) *collector {
	return &collector{target: int64(target), all: make(chan struct{}), took: make([]time.Duration, 0, target)}
}

func (c *collector) Received(string, int)            {}
func (c *collector) ReceiveError(string, error)      {}
func (c *collector) BatchFailed(string, string, int) {}
func (c *collector) InFlight(int)                    {}

func (c *collector) Done(_ string, r process.Result, took time.Duration) {
	if r.Action != process.Delete || !r.Applied {
		c.failed.Add(1)
	}
	c.mu.Lock()
	c.took = append(c.took, took)
	c.mu.Unlock()
	if c.n.Add(1) == c.target {
		close(c.all)
	}
}

func (c *collector) percentiles() (p50, p99 time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := Percentiles(c.took, 0.50, 0.99)
	return ps[0], ps[1]
}
