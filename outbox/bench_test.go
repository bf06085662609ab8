package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

// counting counts the requests the relay sends.
type countingDB struct {
	dbAPI
	n atomic.Int64
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return c.dbAPI.GetItem(ctx, in, o...)
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.n.Add(1)
	return c.dbAPI.BatchGetItem(ctx, in, o...)
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.n.Add(1)
	return c.dbAPI.Query(ctx, in, o...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	return c.dbAPI.TransactWriteItems(ctx, in, o...)
}

type countingSQS struct {
	sqsAPI
	n atomic.Int64
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.n.Add(1)
	return c.sqsAPI.SendMessageBatch(ctx, in, o...)
}

// BenchmarkRelay measures the relay's publication against the emulators
// (make stack-up; . .stack/env), as a ratio to the baseline measured in the
// same run: the same messages sent straight to SQS, ten per
// SendMessageBatch, one message per group per batch as the relay sends
// them. Each iteration publishes 200 messages already in the outbox, over
// 1, 20 or 200 groups. Reported: messages/s of each (msgs/s, baseline_msgs/s),
// their ratio (x_baseline), and the relay's requests per message.
func BenchmarkRelay(b *testing.B) {
	for _, groups := range []int{1, 20, 200} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			ctx := context.Background()
			db := testenv.DynamoDB(b)
			sq := testenv.SQS(b)
			e := newEnv(b, db, sq)
			const n = 200
			var relayNS, baseNS int64
			cdb, csq := &countingDB{dbAPI: db}, &countingSQS{sqsAPI: sq}
			r := &outbox.Relay{DB: cdb, SQS: csq, Table: e.table, PerGroup: 50}
			ob := outbox.New(db, e.table)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				for k := 0; k < n; k += 10 {
					var msgs []outbox.Message
					for j := k; j < k+10; j++ {
						msgs = append(msgs, outbox.Message{QueueURL: e.q1, Group: strconv.Itoa(j % groups), Body: fmt.Sprint("m", i, "-", j), ID: fmt.Sprint("r", i, "-", j)})
					}
					require.NoError(b, ob.Write(ctx, msgs))
				}
				b.StartTimer()
				t0 := time.Now().UnixNano()
				published := 0
				for published < n {
					round, err := r.Sweep(ctx)
					require.NoError(b, err)
					published += round.Published
				}
				relayNS += time.Now().UnixNano() - t0
				b.StopTimer()
				drain(b, sq, e.q1)
				// Baseline: the same publication without the outbox.
				t0 = time.Now().UnixNano()
				for k := 0; k < n; {
					var entries []sqstypes.SendMessageBatchRequestEntry
					seen := map[string]bool{}
					for j := k; j < n && len(entries) < 10; j++ {
						g := strconv.Itoa(j % groups)
						if seen[g] {
							break
						}
						seen[g] = true
						entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String("x"),
							MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(fmt.Sprint("b", i, "-", j))})
					}
					_, err := sq.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &e.q1, Entries: entries})
					require.NoError(b, err)
					k += len(entries)
				}
				baseNS += time.Now().UnixNano() - t0
				drain(b, sq, e.q1)
				b.StartTimer()
			}
			msgs := float64(n * b.N)
			b.ReportMetric(msgs/(float64(relayNS)/1e9), "msgs/s")
			b.ReportMetric(msgs/(float64(baseNS)/1e9), "baseline_msgs/s")
			b.ReportMetric(float64(baseNS)/float64(relayNS), "x_baseline")
			b.ReportMetric(float64(cdb.n.Load())/msgs, "dynamodb_req/msg")
			b.ReportMetric(float64(csq.n.Load())/msgs, "sqs_req/msg")
		})
	}
}

func drain(b *testing.B, sq sqsAPI, url string) {
	b.Helper()
	for {
		out, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
		require.NoError(b, err)
		if len(out.Messages) == 0 {
			return
		}
		var entries []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		_, err = sq.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
		require.NoError(b, err)
	}
}
