package memdynamo_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/memdynamo"
)

// txDB is what the benchmark needs of a database.
type txDB interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// workerCommit is a transaction shaped like the ledger worker's optimistic
// commit: a dedup record put on the claim's condition, with a token, and
// two ledger updates.
func workerCommit(table string, n int64) *dynamodb.TransactWriteItemsInput {
	k := strconv.FormatInt(n, 10)
	return &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String("tok-" + k),
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: V{
				"pk": S("ns#q.fifo#g#" + k), "status": S("COMPLETED"), "token": S("t" + k), "lease_until": N("0"),
				"expires_at": N("1900000000"), "payload_sha256": S("0123456789abcdef0123456789abcdef"), "message_id": S("m" + k),
				"group": S("g"), "attempts": N("1"), "created_at": N("1800000000000"), "completed_at": N("1800000000000"),
			},
				ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :now_s OR (#s = :ip AND lease_until < :now_ms)"),
				ExpressionAttributeNames:            map[string]string{"#s": "status"},
				ExpressionAttributeValues:           V{":now_s": N("1800000000"), ":now_ms": N("1800000000000"), ":ip": S("IN_PROGRESS")},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Update: &types.Update{TableName: &table, Key: V{"pk": S("acct-a-" + k)}, UpdateExpression: aws.String("ADD balance :x SET updated = :now"),
				ExpressionAttributeValues: V{":x": N("-5"), ":now": N("1800000000000")}}},
			{Update: &types.Update{TableName: &table, Key: V{"pk": S("acct-b-" + k)}, UpdateExpression: aws.String("ADD balance :x SET updated = :now"),
				ExpressionAttributeValues: V{":x": N("5"), ":now": N("1800000000000")}}},
		},
	}
}

// commits creates the table "bench" in db and returns what makes the
// worker's commits into it, each of a new key (safe for concurrent use).
func commits(b *testing.B, db txDB) (next func() *dynamodb.TransactWriteItemsInput) {
	b.Helper()
	table := "bench"
	if _, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: &table, BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	return func() *dynamodb.TransactWriteItemsInput { return workerCommit(table, seq.Add(1)) }
}

// benchmarkWorkerCommits runs the worker's commits from 64 goroutines
// (b.SetParallelism(32) at GOMAXPROCS 2, as the bench's concurrency 64).
func benchmarkWorkerCommits(b *testing.B, db txDB) {
	ctx := context.Background()
	next := commits(b, db)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.TransactWriteItems(ctx, next()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkWorkerCommits64: the fake's rate of the worker's commits, 64 at
// a time. Run with -mutexprofile to see the time spent waiting for the
// database's lock.
func BenchmarkWorkerCommits64(b *testing.B) { benchmarkWorkerCommits(b, memdynamo.New()) }

// BenchmarkCommitTimeAtBenchRate: what the fake adds to a commit's time at
// the bench's pace: 64 goroutines, each committing every 12 ms (the aws
// regime's modelled time between a worker's commits), for b.N commits.
// It reports the mean and the 90th and 99th percentile of a
// TransactWriteItems call's wall time: the fake's CPU and the wait for its
// lock (none of the latency layer). docs/BENCHMARKS.md has the figures.
func BenchmarkCommitTimeAtBenchRate(b *testing.B) {
	ctx := context.Background()
	db := memdynamo.New()
	next := commits(b, db)
	var left atomic.Int64
	left.Store(int64(b.N))
	times := make([]time.Duration, b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := left.Add(-1)
				if i < 0 {
					return
				}
				time.Sleep(12 * time.Millisecond)
				t0 := time.Now()
				if _, err := db.TransactWriteItems(ctx, next()); err != nil {
					b.Error(err)
					return
				}
				times[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	slices.Sort(times)
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(b.N), "µs-mean")
	b.ReportMetric(float64(times[b.N*9/10].Microseconds()), "µs-p90")
	b.ReportMetric(float64(times[b.N*99/100].Microseconds()), "µs-p99")
}
