package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
)

// Limits are the rates the emulators allow, measured with plain SDK calls
// without the worker: the best over Config.LimitConcurrency.
type Limits struct {
	At time.Time // the middle of the measurement
	// SQS: messages/s drained from a pre-filled queue of the benchmark's
	// shape with ReceiveMessage(10) + DeleteMessageBatch.
	SQS float64
	// Put: conditional PutItem/s of claim-shaped items on fresh keys.
	Put     float64
	PutConc int // the concurrency Put was reached at
	// Path: messages/s of the worker's own DynamoDB work alone, through
	// internal/dedup, without SQS: in optimistic mode one TransactWriteItems
	// of the record and the ledger's writes (a PutItem of the record for
	// noop); in transactional mode the claim's PutItem, then the commit
	// (TransactWriteItems, or UpdateItem for noop).
	Path float64
	// WritesPerMessage is the worker's DynamoDB writes per message: 1 in
	// optimistic mode, 2 in transactional mode.
	WritesPerMessage int
}

// writesPerMessage is the worker's DynamoDB writes per message in a
// commit mode.
func writesPerMessage(commit string) int {
	if commit == "optimistic" {
		return 1
	}
	return 2
}

// Limit is the limit the emulators set: the lower of the SQS rate and the
// conditional-put rate divided by the writes per message.
func (l Limits) Limit() float64 {
	return min(l.SQS, l.Put/float64(max(l.WritesPerMessage, 1)))
}

// By says which emulator sets the limit.
func (l Limits) By() string {
	if l.SQS <= l.Put/float64(max(l.WritesPerMessage, 1)) {
		return "SQS"
	}
	return "DynamoDB"
}

// errStranded: a drain ended with messages still in flight for nobody. A
// receive whose response was lost (fauxqs drops about one connection in a
// thousand; the SDK retries, and fauxqs ignores ReceiveRequestAttemptId)
// leaves up to ten messages invisible for the visibility timeout: that
// drain's rate says nothing about the emulator's.
var errStranded = errors.New("messages stranded in flight by a lost receive response")

// measureSQS fills a queue with w and drains it with conc goroutines doing
// ReceiveMessage(10) + DeleteMessageBatch; it returns messages/s. A drain
// that strands messages is measured again on a new queue, up to three times.
func measureSQS(ctx context.Context, c *clients, w Work, conc int) (rate float64, err error) {
	for range 3 {
		if rate, err = drainOnce(ctx, c, w, conc); !errors.Is(err, errStranded) {
			break
		}
	}
	return rate, err
}

func drainOnce(ctx context.Context, c *clients, w Work, conc int) (float64, error) {
	url, err := c.newQueue(ctx, "bench-raw")
	if err != nil {
		return 0, err
	}
	defer c.deleteQueue(url)
	if _, err := c.fill(ctx, url, w, 8); err != nil {
		return 0, err
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var end time.Time
	var once sync.Once
	start := time.Now()
	for range conc {
		wg.Go(func() {
			empty := 0
			for got.Load() < int64(w.N) && empty < 3 {
				out, err := c.sqs.ReceiveMessage(dctx, receiveInput(url, 10, 1))
				if err != nil {
					if dctx.Err() == nil {
						errs <- fmt.Errorf("raw receive: %w", err)
					}
					return
				}
				if len(out.Messages) == 0 {
					empty++
					continue
				}
				empty = 0
				del, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: deleteEntries(out.Messages)})
				if err == nil && len(del.Failed) > 0 {
					err = errors.New(aws.ToString(del.Failed[0].Message))
				}
				if err != nil {
					errs <- fmt.Errorf("raw delete: %w", err)
					return
				}
				if got.Add(int64(len(out.Messages))) >= int64(w.N) {
					// The last message is gone: stop the clock, end the
					// other goroutines' long polls.
					once.Do(func() { end = time.Now(); cancel() })
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if got.Load() < int64(w.N) {
		return 0, fmt.Errorf("raw drain got %d of %d messages: %w", got.Load(), w.N, errStranded)
	}
	return float64(got.Load()) / end.Sub(start).Seconds(), nil
}

// measurePut runs conditional PutItems of claim-shaped items on fresh keys
// from conc goroutines for d; it returns puts/s.
func measurePut(ctx context.Context, c *clients, d time.Duration, conc int) (float64, error) {
	table, err := c.newTable(ctx, "bench-put", true)
	if err != nil {
		return 0, err
	}
	defer c.deleteTable(table)
	return timed(ctx, d, conc, func(ctx context.Context, _ int, i int64) error {
		now := time.Now()
		_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &table,
			Item: map[string]ddbtypes.AttributeValue{
				"pk":             str("bench#q#k" + strconv.FormatInt(i, 10)),
				"status":         str("IN_PROGRESS"),
				"token":          str("0123456789abcdef0123456789abcdef"),
				"lease_until":    num(now.Add(30 * time.Second).UnixMilli()),
				"expires_at":     num(now.Add(time.Hour).Unix()),
				"payload_sha256": str("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
				"attempts":       num(1),
				"created_at":     num(now.UnixMilli()),
				"message_id":     str("00000000-0000-0000-0000-000000000000"),
				"group":          str("g1"),
			},
			ConditionExpression: aws.String("attribute_not_exists(#pk) OR #exp < :now_s OR (#st = :inprog AND #lu < :now_ms)"),
			ExpressionAttributeNames: map[string]string{
				"#pk": "pk", "#exp": "expires_at", "#st": "status", "#lu": "lease_until",
			},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":now_s": num(now.Unix()), ":now_ms": num(now.UnixMilli()), ":inprog": str("IN_PROGRESS"),
			},
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	})
}

// measurePath runs the worker's DynamoDB work per message (claim, then
// commit) through internal/dedup from conc goroutines for d, without SQS;
// it returns messages/s. With the ledger effect, each goroutine owns its
// accounts, as a message group does.
func measurePath(ctx context.Context, c *clients, d time.Duration, conc int, effName, commit string) (float64, error) {
	dedupTable, err := c.newTable(ctx, "bench-path-dedup", true)
	if err != nil {
		return 0, err
	}
	defer c.deleteTable(dedupTable)
	ledgerTable, err := c.newTable(ctx, "bench-path-ledger", false)
	if err != nil {
		return 0, err
	}
	defer c.deleteTable(ledgerTable)
	store := dedup.NewStore(c.db, dedupTable)
	ledger := &builtin.Ledger{Table: ledgerTable}
	return timed(ctx, d, conc, func(ctx context.Context, worker int, i int64) error {
		key := "bench#q#k" + strconv.FormatInt(i, 10)
		body := fmt.Sprintf(`{"account":"a%d","amount_cents":1}`, worker)
		if commit == "optimistic" {
			var writes []ddbtypes.TransactWriteItem
			if effName == "ledger" {
				out, err := ledger.Apply(ctx, effect.Input{Message: effect.Message{ID: key, Body: body}, Key: key})
				if err != nil {
					return err
				}
				writes = out.Writes
			}
			c, err := store.CommitOptimistic(ctx, dedup.ClaimRequest{Key: key, PayloadSHA256: dedup.PayloadHash(body), MessageID: key, TTL: time.Hour}, nil, writes)
			if err == nil && c.Outcome != dedup.Won {
				err = fmt.Errorf("commit of a fresh key: %s", c.Outcome)
			}
			return err
		}
		claim, err := store.Claim(ctx, dedup.ClaimRequest{
			Key: key, PayloadSHA256: dedup.PayloadHash(body), MessageID: key, Lease: 30 * time.Second, TTL: time.Hour,
		})
		if err != nil {
			return err
		}
		if claim.Outcome != dedup.Won {
			return fmt.Errorf("claim of a fresh key: %s", claim.Outcome)
		}
		if effName != "ledger" {
			return store.Complete(ctx, claim, nil, time.Hour)
		}
		out, err := ledger.Apply(ctx, effect.Input{Message: effect.Message{ID: key, Body: body}, Key: key})
		if err != nil {
			return err
		}
		return store.CompleteTx(ctx, claim, nil, time.Hour, out.Writes)
	})
}

// timed calls op with increasing indexes from conc goroutines (numbered
// 0..conc-1) for d and returns calls/s. The first error stops it.
func timed(ctx context.Context, d time.Duration, conc int, op func(ctx context.Context, worker int, i int64) error) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range conc {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := op(ctx, w, next.Add(1)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

func str(s string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: s} }
func num(n int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
