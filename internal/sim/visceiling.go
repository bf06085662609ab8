package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// The visibility ceiling (issue 19): SQS refuses a message's visibility
// past 12 hours (43,200 s) from its receive, and the pool caps its
// extensions there (maxVisibility in internal/pool). No world of the
// swarm lasts 12 hours of virtual time (settleCap is 4 h, and the whole
// world over 12 h costs too much CPU), so this is a small world of its
// own, run by TestVisibilityCeiling: one FIFO queue, pool workers built by
// exactly.New in claim mode, and a group whose first message's effect runs
// 12 h plus 5 to 60 minutes, so that the keeper's extensions meet the cap
// and the message is delivered again while its effect still runs; drawn
// from the seed: the queue's visibility timeout (30 s to 15 min), the
// workers (1 or 2), their WaitTime (1 s or 20 s, SQS's bounds).
//
// Judged: no ChangeMessageVisibility that reaches SQS asks for a deadline
// past 43,200 s from the receive (counted from when the receive request
// was made, the earliest SQS can have handed the message out), and SQS
// refuses none for it; the long effect runs once (the ledger's lease holds
// the key across the redelivery), every message's effect runs once, and
// the group's second message starts only after the first one's effect
// ended; the queue is empty at the end.

// visQueue is the ceiling world's SQS: memsqs, watched.
type visQueue struct {
	*memsqs.Server
	mu       sync.Mutex
	vis      time.Duration        // the queue's visibility timeout
	asked    map[string]time.Time // receipt -> when its receive was asked for
	bad      []string
	nearCap  int // extensions within the last visibility timeout before the cap
	extended int
}

func (q *visQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	at := time.Now()
	out, err := q.Server.ReceiveMessage(ctx, in, opt...)
	if out != nil {
		q.mu.Lock()
		for _, m := range out.Messages {
			q.asked[aws.ToString(m.ReceiptHandle)] = at
		}
		q.mu.Unlock()
	}
	return out, err
}

// change judges one extension of receipt by secs, asked now.
func (q *visQueue) change(receipt string, secs int32, refused string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at, ok := q.asked[receipt]
	if !ok && secs == 0 {
		return // exactly.New's preflight probes the permission with a made-up receipt
	}
	if !ok {
		q.bad = append(q.bad, fmt.Sprintf("visibility change (%d s) of a receipt no receive gave, %s", secs, receipt))
		return
	}
	total := time.Since(at) + time.Duration(secs)*time.Second
	q.extended++
	if total > 12*time.Hour {
		q.bad = append(q.bad, fmt.Sprintf("an extension of %d s asked %s after the receive: %s from it, past SQS's 43,200 s", secs, time.Since(at), total))
	} else if total > 12*time.Hour-q.vis {
		q.nearCap++
	}
	if strings.Contains(refused, "43200") {
		q.bad = append(q.bad, "SQS refused an extension: "+refused)
	}
}

func (q *visQueue) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out, err := q.Server.ChangeMessageVisibilityBatch(ctx, in, opt...)
	failed := map[string]string{}
	if err == nil {
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = aws.ToString(f.Message)
		}
	}
	for _, e := range in.Entries {
		q.change(aws.ToString(e.ReceiptHandle), e.VisibilityTimeout, failed[aws.ToString(e.Id)])
	}
	return out, err
}

func (q *visQueue) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	out, err := q.Server.ChangeMessageVisibility(ctx, in, opt...)
	refused := ""
	if err != nil {
		refused = err.Error()
	}
	q.change(aws.ToString(in.ReceiptHandle), in.VisibilityTimeout, refused)
	return out, err
}

// visRun is one effect run of the ceiling world.
type visRun struct {
	body       string
	start, end time.Duration
}

// visCeiling runs the ceiling world of seed (inside a synctest bubble)
// and returns its violations and what it saw.
func visCeiling(seed uint64) (violations []string, stats map[string]int) {
	r := func(what string, n uint64) uint64 { return hash64(seed, "visceiling", what) % n }
	vis := []time.Duration{30 * time.Second, 2 * time.Minute, 15 * time.Minute}[r("vis", 3)]
	workers := 1 + int(r("workers", 2))
	wait := []time.Duration{time.Second, 20 * time.Second}[r("wait", 2)]
	long := 12*time.Hour + 5*time.Minute + time.Duration(r("long", 56))*time.Minute
	stats = map[string]int{fmt.Sprintf("visibility=%s workers=%d wait=%s", vis, workers, wait): 1}
	fail := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	q := &visQueue{Server: memsqs.New(memsqs.WithIDs(rand.NewPCG(seed, 0x715))), vis: vis, asked: map[string]time.Time{}}
	db := memdynamo.New()
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}); err != nil {
		return []string{"set-up: " + err.Error()}, stats
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)}}); err != nil {
		return []string{"set-up: " + err.Error()}, stats
	}
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("ceiling.fifo"), Attributes: map[string]string{
		"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(int(vis / time.Second))}})
	if err != nil {
		return []string{"set-up: " + err.Error()}, stats
	}
	url := aws.ToString(cq.QueueUrl)
	// The long one and the one after it in group g; another group beside.
	msgs := []struct{ group, body string }{{"g", "long"}, {"g", "next"}, {"h", "beside"}}
	for i, m := range msgs {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(m.body), MessageGroupId: aws.String(m.group),
			MessageDeduplicationId: aws.String(strconv.Itoa(i)), MessageAttributes: map[string]types.MessageAttributeValue{
				dedup.IdempotencyKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String("k-" + m.body)}}}); err != nil {
			return []string{"set-up: " + err.Error()}, stats
		}
	}

	var mu sync.Mutex
	var runs []visRun
	started := map[string]int{}
	eff := effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
		run := visRun{body: in.Message.Body, start: time.Since(start)}
		mu.Lock()
		started[run.body]++
		mu.Unlock()
		d := time.Second
		if in.Message.Body == "long" {
			d = long
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return effect.Output{}, ctx.Err()
		}
		run.end = time.Since(start)
		mu.Lock()
		runs = append(runs, run)
		mu.Unlock()
		return effect.Output{Result: []byte("done")}, nil
	})
	var wg sync.WaitGroup
	for i := range workers {
		wk, err := exactly.New(ctx, exactly.Config{Queues: []string{url}, SQS: q, DynamoDB: db, Table: table, Namespace: namespace,
			Effect: eff, Commit: exactly.CommitClaim, WaitTime: wait,
			Test: exactly.TestConfig{Now: time.Now, Rand: rand.NewPCG(seed, uint64(i))}})
		if err != nil {
			return []string{"set-up: exactly.New: " + err.Error()}, stats
		}
		wg.Go(func() { _ = wk.Run(ctx) })
	}
	for time.Since(start) < long+2*time.Hour {
		time.Sleep(time.Minute)
		a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		mu.Lock()
		n := len(runs)
		mu.Unlock()
		if err == nil && n >= len(msgs) && a.Attributes["ApproximateNumberOfMessages"] == "0" && a.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			break
		}
	}
	cancel()
	wg.Wait()

	q.mu.Lock()
	violations = append(violations, q.bad...)
	stats["extensions"], stats["extensions within a visibility timeout of the 12 h cap"] = q.extended, q.nearCap
	stats["receipts"] = len(q.asked)
	q.mu.Unlock()
	if q.nearCap == 0 {
		fail("no extension came near the 12 h cap: the world does not reach the ceiling")
	}
	byBody := map[string][]visRun{}
	for _, run := range runs {
		byBody[run.body] = append(byBody[run.body], run)
	}
	for _, m := range msgs {
		if n, s := len(byBody[m.body]), started[m.body]; n != 1 || s != 1 {
			fail("message %q's effect started %d times and ran to its end %d times, want once", m.body, s, n)
		}
	}
	if l, n := byBody["long"], byBody["next"]; len(l) == 1 && len(n) == 1 && n[0].start < l[0].end {
		fail("group order: the group's second message started at %s, before the first one's effect ended at %s", n[0].start, l[0].end)
	}
	a, err := q.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil || a.Attributes["ApproximateNumberOfMessages"] != "0" || a.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		fail("messages left in the queue at the end: %v (%v)", a, err)
	}
	return violations, stats
}
