package bench

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// BenchmarkWorker is the whole worker at the process level: exactly.New
// and Run, as `worker run` builds it (receivers, pool, processor, dedup
// ledger, the ledger effect, metrics on a registry, a logger), on the
// in-memory fakes with no latency, for b.N messages. It reports the
// process's CPU time per message (getrusage: user + system, every
// goroutine's, the fakes' included), and the hand-written consumer's on
// the same messages and fakes measured in the same benchmark just before
// (x-handwritten is the ratio). The harness's target (1.5×) is checked
// with the SDK, in the emulator regime (docs/BENCHMARKS.md); this guards
// the worker's own share against regressions without the emulators.
func BenchmarkWorker(b *testing.B) {
	const conc = 16
	hand := cpuPerMessage(b, b.N, func(ctx context.Context, srv *memsqs.Server, db *memdynamo.DB, url string, done func() bool) (wait func()) {
		reg := prometheus.NewRegistry()
		h := newHandwritten(srv, db, []string{url}, "ledger", reg)
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = h.run(ctx, conc) }()
		for !done() && gathered(b, reg, "exactly_effects_applied_total") < float64(b.N) {
			time.Sleep(time.Millisecond)
		}
		return func() { <-stopped }
	})
	b.ResetTimer() // ns/op and allocs/op are the worker's
	worker := cpuPerMessage(b, b.N, func(ctx context.Context, srv *memsqs.Server, db *memdynamo.DB, url string, done func() bool) (wait func()) {
		w, err := exactly.New(ctx, exactly.Config{
			SQS: srv, DynamoDB: db, Queues: []string{url}, Table: "dedup", Effect: &builtin.Ledger{Table: "ledger"},
			Concurrency: conc, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
		})
		if err != nil {
			b.Fatal(err)
		}
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = w.Run(ctx) }()
		for !done() && w.Stats().Applied < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		return func() { <-stopped }
	})
	b.ReportMetric(worker, "cpu-us/msg")
	b.ReportMetric(hand, "handwritten-cpu-us/msg")
	if hand > 0 {
		b.ReportMetric(worker/hand, "x-handwritten")
	}
}

// cpuPerMessage fills fresh fakes with n messages, runs consume until it
// returns (it waits for n effects), stops the consumer and waits for it
// (wait: every goroutine it started has ended) and returns the process's
// CPU time per message in µs, the fill excluded.
func cpuPerMessage(b *testing.B, n int, consume func(ctx context.Context, srv *memsqs.Server, db *memdynamo.DB, url string, done func() bool) (wait func())) float64 {
	b.Helper()
	b.StopTimer()
	srv := memsqs.New()
	db := memdynamo.New()
	url := memQueue(b, srv, "worker")
	memTable(b, db, "dedup")
	memTable(b, db, "ledger")
	if _, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("dedup"),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	}); err != nil {
		b.Fatal(err)
	}
	memFill(b, srv, url, n)
	ctx, cancel := context.WithCancel(context.Background())
	deadline := time.Now().Add(5 * time.Minute)
	// Only the consuming is timed (ns/op, allocs/op): with the fill and
	// the shutdown (which waits out the long polls under way) in the
	// timer, a first run of one message took a second, and the benchmark
	// stopped there, at one message's start-up costs.
	before := rusage(b)
	b.StartTimer()
	wait := consume(ctx, srv, db, url, func() bool { return time.Now().After(deadline) })
	b.StopTimer()
	after := rusage(b)
	cancel()
	wait()
	// Long polls the consumer gave up on go on in memsqs, as on SQS, until
	// their wait time ends: deleting the queue ends them now.
	if _, err := srv.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		b.Fatal(err)
	}
	if time.Now().After(deadline) {
		b.Fatal("not every message applied within 5 minutes")
	}
	return float64(after-before) / float64(time.Microsecond) / float64(n)
}

func rusage(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
