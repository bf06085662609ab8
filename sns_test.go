package exactly_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/snsmsg"
)

// seen records what an effect was given, per body.
type seen struct {
	mu  sync.Mutex
	ins []effect.Input
}

func (s *seen) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ins = append(s.ins, in)
	return effect.Output{}, nil
}

func (s *seen) bodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.ins))
	for i, in := range s.ins {
		out[i] = in.Message.Body
	}
	return out
}

type fanOut struct {
	sqs         *memsqs.Server
	sns         *memsns.Server
	topic       string
	env, raw    string // the queues: raw delivery off, on
	envDLQ      string
	envFx, rawF *seen
}

func newFanOut(t *testing.T) *fanOut {
	t.Helper()
	f := &fanOut{sqs: memsqs.New(), envFx: &seen{}, rawF: &seen{}}
	f.sns = memsns.New(f.sqs)
	ctx := context.Background()
	top, err := f.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("events.fifo"), Attributes: map[string]string{"FifoTopic": "true"}})
	require.NoError(t, err)
	f.topic = *top.TopicArn
	f.env, f.envDLQ = memsqs.NewQueue(t, f.sqs, true, nil, 5)
	f.raw, _ = memsqs.NewQueue(t, f.sqs, true, nil, 5)
	for _, q := range []struct {
		url string
		raw bool
	}{{f.env, false}, {f.raw, true}} {
		_, err := f.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: &f.topic, Protocol: aws.String("sqs"), Endpoint: aws.String(arnOf(t, f.sqs, q.url)),
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(q.raw)}})
		require.NoError(t, err)
	}
	return f
}

func (f *fanOut) publish(t *testing.T, body, group, dedupID, key string) *sns.PublishOutput {
	t.Helper()
	in := &sns.PublishInput{TopicArn: &f.topic, Message: &body, MessageGroupId: &group, MessageDeduplicationId: &dedupID,
		MessageAttributes: map[string]snstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("deposit")}}}
	if key != "" {
		in.MessageAttributes["idempotency-key"] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: &key}
	}
	out, err := f.sns.Publish(context.Background(), in)
	require.NoError(t, err)
	return out
}

func (f *fanOut) worker(t *testing.T, url string, raw bool, eff effect.Effect) *exactly.Worker {
	t.Helper()
	w, err := exactly.New(context.Background(), exactly.Config{
		SQS: f.sqs, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: eff, WaitTime: time.Second,
		Subscriptions: []exactly.Subscription{{Queue: url, Topic: f.topic, Raw: raw}},
	})
	require.NoError(t, err)
	return w
}

// TestFanOutAppliesEachPublicationOncePerQueue: a FIFO topic with two FIFO
// queues subscribed (raw delivery off on one, on on the other), a worker on
// each. Every publication is applied once on each queue, in its group's
// order, with the published body and attributes and the envelope's facts;
// a producer retry inside SNS's window never reaches a queue, one under a
// new deduplication id with the same idempotency-key and one past the
// five-minute window (SNS and SQS both take it again) are dropped by the
// ledger, as duplicates, not conflicts.
func TestFanOutAppliesEachPublicationOncePerQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFanOut(t)
		first := f.publish(t, "m0", "g", "d0", "k0")
		for i := 1; i < 5; i++ {
			f.publish(t, fmt.Sprintf("m%d", i), "g", fmt.Sprintf("d%d", i), fmt.Sprintf("k%d", i))
		}
		f.publish(t, "m0", "g", "d0", "k0")  // inside the window: SNS drops it
		f.publish(t, "m1", "g", "new", "k1") // a new dedup id, the same key: the ledger drops it
		envW, rawW := f.worker(t, f.env, false, f.envFx), f.worker(t, f.raw, true, f.rawF)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		go func() { done <- envW.Run(ctx) }()
		go func() { done <- rawW.Run(ctx) }()
		time.Sleep(6 * time.Minute)
		f.publish(t, "m2", "g", "d2", "k2") // past five minutes: a new publication everywhere
		time.Sleep(time.Minute)
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, <-done)

		want := []string{"m0", "m1", "m2", "m3", "m4"}
		require.Equal(t, want, f.envFx.bodies(), "raw delivery off: each once, in order")
		require.Equal(t, want, f.rawF.bodies(), "raw delivery on: each once, in order")
		for _, w := range []*exactly.Worker{envW, rawW} {
			st := w.Stats()
			require.EqualValues(t, 5, st.Applied)
			require.EqualValues(t, 2, st.Duplicates, "the retry under a new dedup id and the one past the window")
			require.EqualValues(t, 0, st.Conflicts, "the payload is the published message, not the envelope")
		}
		e := f.envFx.ins[0]
		require.Equal(t, map[string]string{"kind": "deposit", "idempotency-key": "k0"}, e.Message.Attributes)
		require.Equal(t, "k0", e.DedupKey)
		require.Equal(t, "g", e.Message.Group)
		require.Equal(t, "d0", e.Message.DedupID)
		require.NotNil(t, e.Message.Notification)
		require.Equal(t, f.topic, e.Message.Notification.TopicARN)
		require.Equal(t, *first.MessageId, e.Message.Notification.MessageID)
		require.Equal(t, *first.SequenceNumber, e.Message.Notification.SequenceNumber)
		require.False(t, e.Message.Notification.Timestamp.IsZero())
		r := f.rawF.ins[0]
		require.Equal(t, map[string]string{"kind": "deposit", "idempotency-key": "k0"}, r.Message.Attributes)
		require.Equal(t, &effect.Notification{TopicARN: f.topic}, r.Message.Notification, "raw delivery: SNS sends only the message")
		require.NotEqual(t, e.Key, r.Key, "the key is scoped per subscribing queue")
		require.Equal(t, e.DedupKey, r.DedupKey, "the producer's key is the same")
	})
}

// TestFanOutNotAnEnvelopeIsPermanent: on a queue declared subscribed with
// raw delivery off, a body that is not SNS's envelope, an envelope from
// another topic and one whose Message is past SNS's limit each go to the
// DLQ with the reason, never to the effect; the group goes on.
func TestFanOutNotAnEnvelopeIsPermanent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFanOut(t)
		send := func(dedupID, body string) {
			_, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &f.env, MessageBody: &body,
				MessageGroupId: aws.String("g"), MessageDeduplicationId: &dedupID})
			require.NoError(t, err)
		}
		env := func(topic, msg string) string {
			b, err := snsmsg.Marshal(snsmsg.Envelope{Type: "Notification", MessageID: "x", TopicARN: topic, Message: msg, Timestamp: "2026-01-01T00:00:00.000Z"})
			require.NoError(t, err)
			return b
		}
		send("plain", `{"amount":5}`)
		send("other", env("arn:aws:sns:us-east-1:000000000000:other.fifo", "from elsewhere"))
		f.publish(t, "good", "g", "good", "")
		var dones []exactly.Done
		var mu sync.Mutex
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: f.sqs, DynamoDB: memTable(t), Table: "dedup", Queues: []string{f.env}, Effect: f.envFx, WaitTime: time.Second,
			Subscriptions: []exactly.Subscription{{Queue: f.env, Topic: f.topic}},
			Hooks: exactly.Hooks{Done: func(d exactly.Done) {
				mu.Lock()
				defer mu.Unlock()
				dones = append(dones, d)
			}},
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		time.Sleep(time.Minute)
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, []string{"good"}, f.envFx.bodies())
		require.Len(t, dones, 3)
		require.Equal(t, exactly.Failed, dones[0].Outcome)
		require.ErrorContains(t, dones[0].Err, "not an SNS notification envelope")
		require.ErrorContains(t, dones[0].Err, "raw message delivery off")
		require.ErrorContains(t, dones[1].Err, "the envelope comes from arn:aws:sns:us-east-1:000000000000:other.fifo")
		out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &f.envDLQ, MaxNumberOfMessages: 10})
		require.NoError(t, err)
		require.Len(t, out.Messages, 2, "both in the DLQ, as they came")
		require.JSONEq(t, `{"amount":5}`, *out.Messages[0].Body)
	})
}

// TestLambdaUnwrapsASubscribedQueue: the Lambda handler unwraps the
// envelope of a record of a subscribed queue, and reports a body that is
// not one as failed (its DLQ copy made) without running the effect.
func TestLambdaUnwrapsASubscribedQueue(t *testing.T) {
	t.Parallel()
	f := newFanOut(t)
	eff := &seen{}
	h := lambdaHandler(t, f.sqs, eff, exactly.Config{Queues: []string{f.env},
		Subscriptions: []exactly.Subscription{{Queue: f.env, Topic: f.topic}}})
	arn := arnOf(t, f.sqs, f.env)
	body, err := snsmsg.Marshal(snsmsg.Envelope{Type: "Notification", MessageID: "sns-1", SequenceNumber: "10000000000000000001",
		TopicARN: f.topic, Message: "published", Timestamp: "2026-01-01T00:00:00.000Z",
		MessageAttributes: map[string]snsmsg.Attribute{"idempotency-key": {Type: "String", Value: "k"}}})
	require.NoError(t, err)
	require.Empty(t, handle(t, h, record(arn, "a", "g", "d-a", body)))
	require.Equal(t, []string{"published"}, eff.bodies())
	require.Equal(t, "k", eff.ins[0].DedupKey)
	require.Equal(t, "sns-1", eff.ins[0].Message.Notification.MessageID)
	require.Empty(t, handle(t, h, record(arn, "b", "g", "d-b", "not an envelope")), "moved to the DLQ, so done")
	require.Equal(t, []string{"published"}, eff.bodies(), "a body that is not an envelope never reaches the effect")
	out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &f.envDLQ, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	require.Equal(t, "not an envelope", *out.Messages[0].Body)
}

// TestSubscriptionsConfigErrors: each bad subscription is a *ConfigError
// naming the field and the fix, before any AWS call.
func TestSubscriptionsConfigErrors(t *testing.T) {
	t.Parallel()
	const q = "https://sqs.us-east-1.amazonaws.com/1/orders.fifo"
	const topic = "arn:aws:sns:us-east-1:1:orders.fifo"
	for _, c := range []struct {
		subs    []exactly.Subscription
		setting string
		says    string
	}{
		{[]exactly.Subscription{{Queue: "orders.fifo", Topic: topic}}, "Subscriptions[0].Queue", "is not a queue URL"},
		{[]exactly.Subscription{{Queue: "https://sqs.us-east-1.amazonaws.com/1/other.fifo", Topic: topic}}, "Subscriptions[0].Queue", "is not one of Queues"},
		{[]exactly.Subscription{{Queue: q, Topic: topic}, {Queue: q, Topic: topic, Raw: true}}, "Subscriptions[1].Queue", "declared twice"},
		{[]exactly.Subscription{{Queue: q, Topic: "orders.fifo"}}, "Subscriptions[0].Topic", "is not an SNS topic ARN"},
		{[]exactly.Subscription{{Queue: q, Topic: "arn:aws:sns:us-east-1:1:orders"}}, "Subscriptions[0].Topic", "SNS delivers none to the FIFO queue"},
	} {
		cfg := exactly.Config{SQS: memsqs.New(), DynamoDB: memTable(t), Table: "dedup", Effect: &seen{}, Queues: []string{q}, Subscriptions: c.subs}
		err := cfg.Validate()
		var ce *exactly.ConfigError
		require.ErrorAs(t, err, &ce, c.says)
		require.Equal(t, c.setting, ce.Setting)
		require.ErrorContains(t, err, c.says)
	}
}
