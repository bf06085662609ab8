package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// BenchmarkPool measures one message through the pool (an op is a message).
//
//	memory/*: the pool over the in-memory SQS. allocs/op counts everything
//	  allocated meanwhile, the in-memory SQS and the SDK types included.
//	  noop: a processor that deletes at once (the pool's own cost);
//	  ledger: the real processor, dedup ledger and ledger effect over the
//	  in-memory DynamoDB.
//	emulators: the ledger effect end to end against fauxqs and DynamoDB Local
//	  at concurrency 32. The same run measures what the emulators allow: raw
//	  receive+DeleteMessageBatch on fauxqs, and raw conditional PutItems on
//	  DynamoDB Local divided by the item writes a message costs. share_of_limit
//	  is msg/s over the lower of the two.
//
// Every case reports sqs_req/msg: ReceiveMessage, DeleteMessageBatch and
// ChangeMessageVisibilityBatch requests per message (target: at most 0.25).
//
//	go test -run '^$' -bench Pool ./internal/pool/
func BenchmarkPool(b *testing.B) {
	b.Run("memory/standard/noop", func(b *testing.B) { benchMemory(b, false, 0, false) })
	b.Run("memory/fifo-64-groups/noop", func(b *testing.B) { benchMemory(b, true, 64, false) })
	b.Run("memory/fifo-64-groups/ledger", func(b *testing.B) { benchMemory(b, true, 64, true) })
	b.Run("emulators/fifo-50-groups/ledger", benchEmulators)
}

// doneCounter signals when n messages have been deleted by the processor.
type doneCounter struct {
	nopObserver
	n       atomic.Int64
	want    int64
	reached chan struct{}
}

func (d *doneCounter) Done(_ string, r process.Result, _ time.Duration) {
	if r.Action == process.Delete && d.n.Add(1) == d.want {
		close(d.reached)
	}
}

func ledgerBody(group string, seq int) string {
	return fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, group, seq, seq)
}

// fillStandard sends n messages to a standard queue, 8 batches at once.
func fillStandard(b *testing.B, c sendBatcher, url string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	var failed atomic.Value
	sem := make(chan struct{}, 8)
	for start := 0; start < n; start += 10 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var entries []types.SendMessageBatchRequestEntry
			for i := start; i < min(start+10, n); i++ {
				entries = append(entries, types.SendMessageBatchRequestEntry{
					Id: aws.String(strconv.Itoa(i - start)), MessageBody: aws.String(ledgerBody("acct-"+strconv.Itoa(i%64), i+1)),
				})
			}
			if _, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}); err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("fill: %v", err)
	}
}

// sendBatcher sends message batches.
type sendBatcher interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// fillFIFO sends n ledger messages over groups, each group by one goroutine
// in seq order.
func fillFIFO(b *testing.B, c sendBatcher, url string, n, groups int) {
	b.Helper()
	var wg sync.WaitGroup
	var failed atomic.Value
	sem := make(chan struct{}, 16)
	for g := range groups {
		count := n / groups
		if g < n%groups {
			count++
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			group := fmt.Sprintf("acct-%03d", g)
			for start := 1; start <= count; start += 10 {
				var entries []types.SendMessageBatchRequestEntry
				for seq := start; seq < start+10 && seq <= count; seq++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id: aws.String(strconv.Itoa(seq - start)), MessageBody: aws.String(ledgerBody(group, seq)),
						MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(group + "-" + strconv.Itoa(seq)),
					})
				}
				out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("fill: %v", err)
	}
}

// runUntil runs a pool until want messages are done and returns the time
// it took; the benchmark timer runs only meanwhile.
func runUntil(b *testing.B, cfg Config, want int) time.Duration {
	b.Helper()
	dc := &doneCounter{want: int64(want), reached: make(chan struct{})}
	cfg.Observer = dc
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		p.Run(ctx)
		close(done)
	}()
	select {
	case <-dc.reached:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d messages done", dc.n.Load(), want)
	}
	took := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	return took
}

func (r *recordingSQS) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.receives + len(r.deleteBatches) + r.changeBatches
}

func benchMemory(b *testing.B, fifo bool, groups int, ledger bool) {
	s := memsqs.New()
	url, _ := memsqs.NewQueue(b, s, fifo, nil, 0)
	if fifo {
		fillFIFO(b, s, url, b.N, groups)
	} else {
		fillStandard(b, s, url, b.N)
	}
	rec := &recordingSQS{SQS: s}
	var proc Processor = &fakeProcessor{ProcessFunc: func(context.Context, effect.Message, process.Hooks) process.Result { return deleted() }}
	if ledger {
		db := memdynamo.New()
		table := dedupcontract.Table(b, db)
		proc = &process.Processor{
			Store: dedup.NewStore(db, table), Effect: &builtin.Ledger{Table: table}, Log: slog.New(slog.DiscardHandler),
			Scope: func(effect.Message) dedup.Scope { return dedup.Scope{Namespace: "bench", Queue: sqsmsg.QueueName(url)} },
			Lease: 30 * time.Second, TTL: time.Hour,
		}
	}
	took := runUntil(b, Config{
		Client: rec, Processor: proc, Concurrency: 32,
		Queues: []Queue{{URL: url, FIFO: fifo, Visibility: 30 * time.Second}}, WaitTime: time.Second,
	}, b.N)
	b.ReportMetric(float64(b.N)/took.Seconds(), "msg/s")
	b.ReportMetric(float64(rec.requests())/float64(b.N), "sqs_req/msg")
}

// countingDB counts DynamoDB item writes: one per PutItem and UpdateItem,
// one per item of a TransactWriteItems.
type countingDB struct {
	dedup.API
	writes atomic.Int64
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.writes.Add(1)
	return c.API.PutItem(ctx, in, o...)
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	return c.API.UpdateItem(ctx, in, o...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.writes.Add(int64(len(in.TransactItems)))
	return c.API.TransactWriteItems(ctx, in, o...)
}

// emulatorLimits are the raw rates of the emulators, measured once per run.
var emulatorLimits struct {
	once         sync.Once
	sqsMsgPerSec float64 // receive + DeleteMessageBatch, FIFO, 50 groups, 8-way
	putsPerSec   float64 // conditional PutItem, 32-way
}

const (
	benchGroups      = 50
	benchConcurrency = 32
	rawSample        = 2000
)

func measureLimits(b *testing.B, sc *sqs.Client, db *dynamodb.Client) {
	emulatorLimits.once.Do(func() {
		// SQS: drain a FIFO queue of rawSample messages with batch receives
		// and batch deletes, as fast as fauxqs allows.
		url, _ := testenv.NewQueue(b, sc, true, nil, 0)
		fillFIFO(b, sc, url, rawSample, benchGroups)
		var got atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range 8 {
			wg.Go(func() {
				for got.Load() < rawSample {
					out, err := sc.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
					if err != nil || len(out.Messages) == 0 {
						continue
					}
					entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
					for i, m := range out.Messages {
						entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
					}
					if _, err := sc.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries}); err == nil {
						got.Add(int64(len(entries)))
					}
				}
			})
		}
		wg.Wait()
		emulatorLimits.sqsMsgPerSec = float64(got.Load()) / time.Since(start).Seconds()

		// DynamoDB: conditional puts of fresh keys, as many at once as the
		// pool runs handlers.
		table := dedupcontract.Table(b, db)
		var next atomic.Int64
		start = time.Now()
		for range benchConcurrency {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > rawSample {
						return
					}
					_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
						TableName: &table,
						Item: map[string]ddbtypes.AttributeValue{
							"pk":     &ddbtypes.AttributeValueMemberS{Value: "raw#" + strconv.FormatInt(i, 10)},
							"status": &ddbtypes.AttributeValueMemberS{Value: dedup.StatusInProgress},
						},
						ConditionExpression: aws.String("attribute_not_exists(pk)"),
					})
					if err != nil {
						b.Errorf("raw put: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		emulatorLimits.putsPerSec = rawSample / time.Since(start).Seconds()
	})
}

func benchEmulators(b *testing.B) {
	sc := testenv.SQS(b)
	db := testenv.DynamoDB(b)
	measureLimits(b, sc, db)

	url, _ := testenv.NewQueue(b, sc, true, nil, 0)
	fillFIFO(b, sc, url, b.N, benchGroups)
	cdb := &countingDB{API: db}
	table := dedupcontract.Table(b, db)
	rec := &recordingSQS{SQS: sc}
	proc := &process.Processor{
		Store: dedup.NewStore(cdb, table), Effect: &builtin.Ledger{Table: table}, Log: slog.New(slog.DiscardHandler),
		Scope: func(effect.Message) dedup.Scope { return dedup.Scope{Namespace: "bench", Queue: sqsmsg.QueueName(url)} },
		Lease: 30 * time.Second, TTL: time.Hour,
	}
	took := runUntil(b, Config{
		Client: rec, Processor: proc, Concurrency: benchConcurrency,
		Queues: []Queue{{URL: url, FIFO: true, Visibility: 30 * time.Second}}, WaitTime: time.Second,
	}, b.N)

	rate := float64(b.N) / took.Seconds()
	writes := float64(cdb.writes.Load()) / float64(b.N)
	sqsLimit := emulatorLimits.sqsMsgPerSec
	ddbLimit := emulatorLimits.putsPerSec / max(writes, 1)
	b.ReportMetric(rate, "msg/s")
	b.ReportMetric(rate/min(sqsLimit, ddbLimit), "share_of_limit")
	b.ReportMetric(sqsLimit, "sqs_limit_msg/s")
	b.ReportMetric(ddbLimit, "ddb_limit_msg/s")
	b.ReportMetric(writes, "ddb_writes/msg")
	b.ReportMetric(float64(rec.requests())/float64(b.N), "sqs_req/msg")
}
