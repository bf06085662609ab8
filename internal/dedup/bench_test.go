package dedup_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// BenchmarkClaimComplete measures one logical message's ledger work: a
// claim that wins, then its completion (two conditional writes).
//
//	memory: the ledger over the in-memory DynamoDB (ns/op, allocs/op).
//	ledger-only: the ledger's own cost, over an API that accepts every write.
//	dynamodb-local[-16way]: against DynamoDB Local, which is the bottleneck.
//	  The same run, interleaved, measures raw conditional PutItems (one write
//	  each) and hand-written put+update pairs (the ledger's two writes without
//	  the ledger), and reports claim+complete throughput as a share of each:
//	  share_of_raw_puts (0.5 = the ledger costs two plain writes) and
//	  share_of_raw_put+update (1.0 = the ledger adds nothing to its requests).
//
// go test -run '^$' -bench ClaimComplete ./internal/dedup/ (with the stack up
// for the DynamoDB Local variants; they skip without an endpoint).
func BenchmarkClaimComplete(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		// Keys cycle over a fixed set of slots, and the clock jumps past the
		// TTL after each cycle, so every claim wins (over an absent or an
		// expired record) while the table's size stays put: what is measured
		// is the ledger and the fake, not the GC scanning a growing table.
		const slots = 4096
		db := memdynamo.New()
		clock := dedupcontract.NewClock()
		st := dedup.NewStore(db, dedupcontract.Table(b, db), dedup.WithClock(clock.Now))
		keys := make([]string, slots)
		for i := range keys {
			keys[i] = "bench#orders.fifo#" + strconv.Itoa(i)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%slots == 0 {
				clock.Advance(time.Hour + time.Second)
			}
			claimComplete(b, ctx, st, keys[i%slots])
		}
	})
	b.Run("ledger-only", func(b *testing.B) {
		// The ledger's own cost: requests built and answers read, over an API
		// that accepts every write at once.
		api := &fakeAPI{
			PutItemFunc: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return &dynamodb.PutItemOutput{}, nil },
			UpdateItemFunc: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{}, nil
			},
		}
		st := dedup.NewStore(api, "t")
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			claimComplete(b, ctx, st, "bench#orders.fifo#k")
		}
	})
	b.Run("dynamodb-local", func(b *testing.B) { benchLocal(b, 1) })
	b.Run("dynamodb-local-16way", func(b *testing.B) { benchLocal(b, 16) })
}

const benchHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func claimComplete(b *testing.B, ctx context.Context, st *dedup.Store, key string) {
	c, err := st.Claim(ctx, dedup.ClaimRequest{Key: key, PayloadSHA256: benchHash, MessageID: "m", Group: "g",
		Attempts: 1, Lease: time.Minute, TTL: time.Hour})
	if err != nil || c.Outcome != dedup.Won {
		b.Fatalf("claim %s: %v %v", key, c.Outcome, err)
	}
	if err := st.Complete(ctx, c, nil, time.Hour); err != nil {
		b.Fatalf("complete %s: %v", key, err)
	}
}

func benchLocal(b *testing.B, workers int) {
	db := testenv.DynamoDB(b)
	table := dedupcontract.Table(b, db)
	st := dedup.NewStore(db, table)
	ctx := context.Background()
	run := testenv.Name("r")

	rawPut := func(key string) {
		now := time.Now()
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &table,
			Item: map[string]types.AttributeValue{
				"pk":             &types.AttributeValueMemberS{Value: key},
				"status":         &types.AttributeValueMemberS{Value: dedup.StatusInProgress},
				"token":          &types.AttributeValueMemberS{Value: "0123456789abcdef0123456789abcdef"},
				"lease_until":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10)},
				"expires_at":     &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
				"payload_sha256": &types.AttributeValueMemberS{Value: benchHash},
				"message_id":     &types.AttributeValueMemberS{Value: "m"},
				"group":          &types.AttributeValueMemberS{Value: "g"},
				"attempts":       &types.AttributeValueMemberN{Value: "1"},
				"created_at":     &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		if err != nil {
			b.Fatalf("raw put: %v", err)
		}
	}
	// parallel runs f(0..n-1) on the workers and returns the elapsed time.
	parallel := func(n int, f func(i int)) time.Duration {
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					f(i)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}

	// The same two writes the ledger makes, hand-written: a conditional put
	// and an update conditioned on a token.
	rawPutUpdate := func(key string) {
		rawPut(key)
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                &table,
			Key:                      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
			UpdateExpression:         aws.String("SET #st = :done, completed_at = :now, expires_at = :exp"),
			ConditionExpression:      aws.String("#tok = :tok"),
			ExpressionAttributeNames: map[string]string{"#st": "status", "#tok": "token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":done": &types.AttributeValueMemberS{Value: dedup.StatusCompleted},
				":now":  &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)},
				":exp":  &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
				":tok":  &types.AttributeValueMemberS{Value: "0123456789abcdef0123456789abcdef"},
			},
		})
		if err != nil {
			b.Fatalf("raw update: %v", err)
		}
	}

	// Warm up the emulator (JIT, connections) outside the measurement.
	parallel(200, func(i int) { rawPutUpdate(run + "#warm#" + strconv.Itoa(i)) })

	// The three workloads run interleaved in small chunks, so that a change
	// of load on the machine (other tests, the emulator's GC) weighs on
	// each of them alike; only the ledger's chunks run on the benchmark timer.
	chunk := 16 * workers
	var raw, pair time.Duration
	b.StopTimer()
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		raw += parallel(n, func(i int) { rawPut(run + "#raw#" + strconv.Itoa(done+i)) })
		pair += parallel(n, func(i int) { rawPutUpdate(run + "#pair#" + strconv.Itoa(done+i)) })
		b.StartTimer()
		parallel(n, func(i int) { claimComplete(b, ctx, st, run+"#cc#"+strconv.Itoa(done+i)) })
		b.StopTimer()
	}
	cc := b.Elapsed()

	rawRate := float64(b.N) / raw.Seconds()
	pairRate := float64(b.N) / pair.Seconds()
	ccRate := float64(b.N) / cc.Seconds()
	b.ReportMetric(ccRate, "claim+complete/s")
	b.ReportMetric(rawRate, "raw_puts/s")
	b.ReportMetric(ccRate/rawRate, "share_of_raw_puts")
	b.ReportMetric(ccRate/pairRate, "share_of_raw_put+update")
}
