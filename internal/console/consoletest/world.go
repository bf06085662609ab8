// Package consoletest seeds the in-memory SQS and DynamoDB with what an
// operator's console shows on a bad night: a queue with a dead-letter
// queue holding failed messages of two groups, completed and stuck dedup
// records, an outbox with a pending group and a held one. The console's
// handler tests, its end-to-end test in a browser and its screenshots use
// it; Seed puts the same on the emulators, for a test of the built binary.
package consoletest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/console"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// SQS is what seeding calls on SQS, and what the console calls.
type SQS interface {
	console.SQS
	outbox.SQS
	CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	SetQueueAttributes(context.Context, *sqs.SetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DB is what seeding calls on DynamoDB, and what the console calls.
type DB interface {
	console.DB
	dedup.API
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// World is the seeded stores and what is in them.
type World struct {
	SQS SQS
	DB  DB

	Queue, DLQ, Confirm     string // queue URLs
	DedupTable, OutboxTable string
	Namespace               string
	DoneKey                 string // a COMPLETED record's key: order-1234's
	DoneDedupID, DoneGroup  string // how to find it by queue
	// ConflictHash and ConflictMessageID: a delivery of another payload
	// under DoneKey, refused as a conflict and noted on its record.
	ConflictHash, ConflictMessageID string
	StuckKeys                       []string // IN_PROGRESS, lease ended, oldest first
	LiveKey                         string   // IN_PROGRESS, lease live
	DLQGroups                       []string // groups in the DLQ, in order
	DLQCount                        map[string]int
	HeldGroup, PendingGroup         string // outbox groups of Confirm
	HeldID                          string
	HeldBody                        string
	Secret                          string // a body only revealed on request
	DedupScope                      dedup.Scope
}

// Config is a console.Config over the world, listening on 127.0.0.1:8080
// (a server on another address sets Addr).
func (w *World) Config(write bool) console.Config {
	return console.Config{Addr: "127.0.0.1:8080", SQS: w.SQS, DB: w.DB, Queues: []string{w.Queue, w.Confirm}, DedupTable: w.DedupTable,
		OutboxTable: w.OutboxTable, Namespace: w.Namespace, Write: write}
}

// New seeds a world in the in-memory stores; now is the records' clock.
func New(ctx context.Context, now time.Time) (*World, error) {
	return Seed(ctx, memsqs.New(), memdynamo.New(), "", now)
}

// Seed seeds a world in the given stores, every queue and table name
// starting with prefix; now is the records' clock.
func Seed(ctx context.Context, sq SQS, db DB, prefix string, now time.Time) (*World, error) {
	w := &World{SQS: sq, DB: db, DedupTable: prefix + "exactly-dedup", OutboxTable: prefix + "exactly-outbox", Namespace: "exactly",
		DLQCount: map[string]int{}, Secret: "card=4111-1111-1111-1111"}
	var err error
	if w.DLQ, err = w.queue(ctx, prefix+"orders-dlq.fifo", nil); err != nil {
		return nil, err
	}
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:" + prefix + "orders-dlq.fifo"
	if out, err := w.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &w.DLQ, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}}); err == nil {
		dlqARN = out.Attributes["QueueArn"]
	}
	if w.Queue, err = w.queue(ctx, prefix+"orders.fifo", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"5"}`}); err != nil {
		return nil, err
	}
	if w.Confirm, err = w.queue(ctx, prefix+"confirmations.fifo", nil); err != nil {
		return nil, err
	}
	w.DedupScope = dedup.Scope{Namespace: w.Namespace, Queue: sqsmsg.QueueName(w.Queue)}

	// Messages waiting in the queue, and dead letters of two groups.
	for i := range 3 {
		if err := w.send(ctx, w.Queue, fmt.Sprintf("acct-%d", i), fmt.Sprintf("deposit-%d", 2000+i), fmt.Sprintf(`{"account":"acct-%d","cents":100}`, i), nil); err != nil {
			return nil, err
		}
	}
	fails := []struct{ group, id, why string }{
		{"acct-7", "order-1301", "ledger: account acct-7 is closed"},
		{"acct-7", "order-1302", "ledger: account acct-7 is closed"},
		{"acct-9", "order-1410", "effect: payload is not JSON: invalid character 'x'"},
	}
	for _, f := range fails {
		at := now.Add(-20 * time.Minute).UTC().Format(time.RFC3339)
		if err := w.send(ctx, w.DLQ, f.group, f.id, `{"order":"`+f.id+`","`+w.Secret+`"}`, map[string]string{sqsmsg.FailureAttribute: f.why, sqsmsg.FailedAtAttribute: at}); err != nil {
			return nil, err
		}
		if w.DLQCount[f.group] == 0 {
			w.DLQGroups = append(w.DLQGroups, f.group)
		}
		w.DLQCount[f.group]++
	}

	// The dedup table: order-1234 done, two stuck claims, a live one.
	if err := w.dedupTable(ctx); err != nil {
		return nil, err
	}
	at := func(ago time.Duration) *dedup.Store {
		return dedup.NewStore(w.DB, w.DedupTable, dedup.WithClock(func() time.Time { return now.Add(-ago) }))
	}
	w.DoneDedupID, w.DoneGroup = "order-1234", "acct-1"
	w.DoneKey = w.DedupScope.Key(w.DoneGroup, w.DoneDedupID)
	c, err := at(5*time.Minute).Claim(ctx, dedup.ClaimRequest{Key: w.DoneKey, PayloadSHA256: dedup.PayloadHash("order-1234"), MessageID: "8f1c2d3e-order-1234", Group: w.DoneGroup, Attempts: 1, Lease: time.Minute, TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	if err := at(5*time.Minute).Complete(ctx, c, []byte(`{"balance_cents":12500}`), 24*time.Hour); err != nil {
		return nil, err
	}
	w.ConflictHash, w.ConflictMessageID = dedup.PayloadHash("order-1234, amended"), "5e6f7a8b-order-1234"
	x, err := at(2*time.Minute).Claim(ctx, dedup.ClaimRequest{Key: w.DoneKey, PayloadSHA256: w.ConflictHash, MessageID: w.ConflictMessageID, Group: w.DoneGroup, Attempts: 1, Lease: time.Minute, TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	if err := at(2*time.Minute).NoteConflict(ctx, x, w.ConflictHash, w.ConflictMessageID); err != nil {
		return nil, err
	}
	for i, ago := range []time.Duration{42 * time.Minute, 9 * time.Minute} {
		k := w.DedupScope.Key("acct-3", fmt.Sprintf("order-15%02d", i))
		if _, err := at(ago).Claim(ctx, dedup.ClaimRequest{Key: k, PayloadSHA256: dedup.PayloadHash(k), MessageID: fmt.Sprintf("m-15%02d", i), Group: "acct-3", Attempts: 2 + i, Lease: time.Minute, TTL: 24 * time.Hour}); err != nil {
			return nil, err
		}
		w.StuckKeys = append(w.StuckKeys, k)
	}
	w.LiveKey = w.DedupScope.Key("acct-4", "order-1600")
	if _, err := at(0).Claim(ctx, dedup.ClaimRequest{Key: w.LiveKey, PayloadSHA256: "h", MessageID: "m-1600", Group: "acct-4", Attempts: 1, Lease: time.Hour, TTL: 24 * time.Hour}); err != nil {
		return nil, err
	}

	// The outbox: a group held at a message SQS refused (too large for
	// the queue's MaximumMessageSize), and a pending group.
	if _, err := w.DB.CreateTable(ctx, outbox.CreateTableInput(w.OutboxTable)); err != nil {
		return nil, err
	}
	ob := outbox.New(w.DB, w.OutboxTable, outbox.WithClock(func() time.Time { return now.Add(-3 * time.Minute) }))
	w.HeldGroup, w.HeldID, w.HeldBody = "acct-5", "confirm-1700", strings.Repeat("x", 2048)
	if err := ob.Write(ctx, []outbox.Message{{QueueURL: w.Confirm, Group: w.HeldGroup, Body: w.HeldBody, ID: w.HeldID}, {QueueURL: w.Confirm, Group: w.HeldGroup, Body: `{"confirm":"1701"}`, ID: "confirm-1701"}}); err != nil {
		return nil, err
	}
	if _, err := w.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &w.Confirm, Attributes: map[string]string{"MaximumMessageSize": "1024"}}); err != nil {
		return nil, err
	}
	if _, err := (&outbox.Relay{DB: w.DB, SQS: w.SQS, Table: w.OutboxTable, Logger: slog.New(slog.DiscardHandler)}).Sweep(ctx); err != nil {
		return nil, err
	}
	w.PendingGroup = "acct-6"
	ob = outbox.New(w.DB, w.OutboxTable, outbox.WithClock(func() time.Time { return now.Add(-time.Minute) }))
	if err := ob.Write(ctx, []outbox.Message{{QueueURL: w.Confirm, Group: w.PendingGroup, Body: `{"confirm":"1800"}`, ID: "confirm-1800"}}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *World) queue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	all := map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"}
	for k, v := range attrs {
		all[k] = v
	}
	out, err := w.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: all})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

func (w *World) send(ctx context.Context, url, group, id, body string, attrs map[string]string) error {
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group, MessageDeduplicationId: &id,
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{}}
	for k, v := range attrs {
		in.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	_, err := w.SQS.SendMessage(ctx, in)
	return err
}

func (w *World) dedupTable(ctx context.Context) error {
	_, err := w.DB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &w.DedupTable,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(dedup.AttrPK), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(dedup.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		return err
	}
	_, err = w.DB.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &w.DedupTable,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)}})
	return err
}

// DLQDepth is how many messages the dead-letter queue holds.
func (w *World) DLQDepth(ctx context.Context) (int, error) { return w.depth(ctx, w.DLQ) }

// QueueDepth is how many messages the queue holds.
func (w *World) QueueDepth(ctx context.Context) (int, error) { return w.depth(ctx, w.Queue) }

func (w *World) depth(ctx context.Context, url string) (int, error) {
	out, err := w.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		v, err := strconv.Atoi(out.Attributes[a])
		if err != nil {
			return 0, fmt.Errorf("%s: %s = %q: %w", url, a, out.Attributes[a], err)
		}
		n += v
	}
	return n, nil
}

// Record reads a dedup record (nil when none).
func (w *World) Record(ctx context.Context, key string) (*dedup.Record, error) {
	out, err := w.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &w.DedupTable, Key: map[string]ddbtypes.AttributeValue{dedup.AttrPK: &ddbtypes.AttributeValueMemberS{Value: key}}})
	if err != nil || len(out.Item) == 0 {
		return nil, err
	}
	return dedup.DecodeRecord(out.Item)
}

// Held reports whether the outbox's held group is still held.
func (w *World) Held(ctx context.Context) (bool, error) {
	_, ok, err := outbox.GroupHeld(ctx, w.DB, w.OutboxTable, w.Confirm, w.HeldGroup)
	return ok, err
}
