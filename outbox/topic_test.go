package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

// snsAPI is what the tests need of SNS: the stub below and fauxqs's SNS
// both offer it.
type snsAPI interface {
	outbox.SNS
	CreateTopic(context.Context, *sns.CreateTopicInput, ...func(*sns.Options)) (*sns.CreateTopicOutput, error)
	Subscribe(context.Context, *sns.SubscribeInput, ...func(*sns.Options)) (*sns.SubscribeOutput, error)
}

// snsStub is an SNS FIFO topic fanning out into SQS queues, a second
// implementation beside internal/memsns that counts the relay's requests:
// PublishBatch with SNS's limits (10
// entries with distinct ids, 256 KiB together and a message, 10 message
// attributes where it delivers to SQS; a FIFO topic's group and
// deduplication id), deduplication by id (for good: the tests take less
// than SNS's five minutes), and delivery to each subscribed queue, raw or
// in SNS's JSON envelope.
type snsStub struct {
	sqs    outbox.SQS
	mu     sync.Mutex
	topics map[string][]stubSub
	seen   map[string]snstypes.PublishBatchResultEntry
	seq    int64
	calls  []int // entries of each PublishBatch
}

type stubSub struct {
	queueURL string
	raw      bool
}

func newSNSStub(q outbox.SQS) *snsStub {
	return &snsStub{sqs: q, topics: map[string][]stubSub{}, seen: map[string]snstypes.PublishBatchResultEntry{}}
}

func (s *snsStub) CreateTopic(_ context.Context, in *sns.CreateTopicInput, _ ...func(*sns.Options)) (*sns.CreateTopicOutput, error) {
	arn := "arn:aws:sns:us-east-1:000000000000:" + aws.ToString(in.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[arn] = nil
	return &sns.CreateTopicOutput{TopicArn: &arn}, nil
}

// Subscribe takes the queue's URL as its endpoint (a real SNS takes its
// ARN): the stub delivers by URL.
func (s *snsStub) Subscribe(_ context.Context, in *sns.SubscribeInput, _ ...func(*sns.Options)) (*sns.SubscribeOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	arn := aws.ToString(in.TopicArn)
	s.topics[arn] = append(s.topics[arn], stubSub{queueURL: aws.ToString(in.Endpoint), raw: in.Attributes["RawMessageDelivery"] == "true"})
	return &sns.SubscribeOutput{SubscriptionArn: aws.String(arn + ":sub")}, nil
}

type stubError struct{ code string }

func (e *stubError) Error() string        { return e.code }
func (e *stubError) ErrorCode() string    { return e.code }
func (e *stubError) ErrorMessage() string { return e.code }

func (s *snsStub) topic(arn string) ([]stubSub, bool) { subs, ok := s.topics[arn]; return subs, ok }

func (s *snsStub) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	arn := aws.ToString(in.TopicArn)
	subs, ok := s.topic(arn)
	if !ok {
		return nil, &stubError{"NotFound"}
	}
	entries := in.PublishBatchRequestEntries
	switch {
	case len(entries) == 0:
		return nil, &stubError{"EmptyBatchRequest"}
	case len(entries) > 10:
		return nil, &stubError{"TooManyEntriesInBatchRequest"}
	}
	total, ids := 0, map[string]bool{}
	for _, e := range entries {
		if ids[aws.ToString(e.Id)] {
			return nil, &stubError{"BatchEntryIdsNotDistinct"}
		}
		ids[aws.ToString(e.Id)] = true
		total += snsSize(e)
	}
	if total > 256*1024 {
		return nil, &stubError{"BatchRequestTooLong"}
	}
	s.calls = append(s.calls, len(entries))
	fifo := strings.HasSuffix(arn, ".fifo")
	out := &sns.PublishBatchOutput{}
	for _, e := range entries {
		fail := func(code string) {
			out.Failed = append(out.Failed, snstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String(code), SenderFault: true})
		}
		switch {
		case snsSize(e) > 256*1024:
			fail("InvalidParameter")
			continue
		case len(e.MessageAttributes) > 10:
			fail("InvalidParameter")
			continue
		case fifo && (e.MessageGroupId == nil || e.MessageDeduplicationId == nil):
			fail("InvalidParameter")
			continue
		}
		if first, dup := s.seen[aws.ToString(e.MessageDeduplicationId)]; fifo && dup {
			out.Successful = append(out.Successful, snstypes.PublishBatchResultEntry{Id: e.Id, MessageId: first.MessageId, SequenceNumber: first.SequenceNumber})
			continue
		}
		s.seq++
		res := snstypes.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String(fmt.Sprint("m-", s.seq)), SequenceNumber: aws.String(fmt.Sprintf("%020d", s.seq))}
		s.seen[aws.ToString(e.MessageDeduplicationId)] = res
		for _, sub := range subs {
			if err := s.deliver(ctx, arn, sub, e, res); err != nil {
				return nil, err
			}
		}
		out.Successful = append(out.Successful, res)
	}
	return out, nil
}

func (s *snsStub) deliver(ctx context.Context, arn string, sub stubSub, e snstypes.PublishBatchRequestEntry, res snstypes.PublishBatchResultEntry) error {
	entry := sqstypes.SendMessageBatchRequestEntry{Id: aws.String("0"), MessageGroupId: e.MessageGroupId, MessageDeduplicationId: e.MessageDeduplicationId}
	if sub.raw {
		entry.MessageBody = e.Message
		entry.MessageAttributes = map[string]sqstypes.MessageAttributeValue{}
		for k, v := range e.MessageAttributes {
			entry.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
		}
	} else {
		attrs := map[string]map[string]string{}
		for k, v := range e.MessageAttributes {
			attrs[k] = map[string]string{"Type": aws.ToString(v.DataType), "Value": aws.ToString(v.StringValue)}
		}
		env, err := json.Marshal(map[string]any{
			"Type": "Notification", "MessageId": aws.ToString(res.MessageId), "SequenceNumber": aws.ToString(res.SequenceNumber),
			"TopicArn": arn, "Message": aws.ToString(e.Message), "MessageAttributes": attrs,
		})
		if err != nil {
			return err
		}
		entry.MessageBody = aws.String(string(env))
	}
	_, err := s.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &sub.queueURL, Entries: []sqstypes.SendMessageBatchRequestEntry{entry}})
	return err
}

// snsSize is what SNS counts of a publication: its body and, per
// attribute, name, type and value.
func snsSize(e snstypes.PublishBatchRequestEntry) int {
	n := len(aws.ToString(e.Message))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
	}
	return n
}

// fanout is an outbox table, a FIFO topic and two FIFO queues subscribed
// to it: raw delivery on the first, SNS's envelope on the second.
type fanout struct {
	*env
	sns        snsAPI
	topic      string
	raw, enved string
}

// eachFanout runs f on the in-memory fakes (memsns, and the stub), and on
// the local stack (fauxqs's SNS over HTTP, DynamoDB Local).
func eachFanout(t *testing.T, f func(t *testing.T, e *fanout)) {
	t.Run("memory", func(t *testing.T) {
		q := memsqs.New()
		f(t, newFanout(t, newEnv(t, memdynamo.New(), q), memsns.New(q), true))
	})
	t.Run("stub", func(t *testing.T) {
		q := memsqs.New()
		f(t, newFanout(t, newEnv(t, memdynamo.New(), q), newSNSStub(q), false))
	})
	t.Run("emulators", func(t *testing.T) {
		e := newEnv(t, testenv.DynamoDB(t), testenv.SQS(t))
		endpoint := cmpOr(os.Getenv("AWS_ENDPOINT_URL_SNS"), os.Getenv("AWS_ENDPOINT_URL_SQS"))
		client := sns.NewFromConfig(testenv.Config(t), func(o *sns.Options) { o.BaseEndpoint = aws.String(endpoint) })
		f(t, newFanout(t, e, client, true))
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newFanout(t *testing.T, e *env, client snsAPI, byARN bool) *fanout {
	t.Helper()
	ctx := context.Background()
	out, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(testenv.Name("topic") + ".fifo"),
		Attributes: map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "false"}})
	require.NoError(t, err)
	fo := &fanout{env: e, sns: client, topic: aws.ToString(out.TopicArn), raw: e.q1, enved: e.q2}
	for _, sub := range []struct {
		url string
		raw bool
	}{{e.q1, true}, {e.q2, false}} {
		endpoint := sub.url
		if byARN {
			attrs, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &sub.url, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
			require.NoError(t, err)
			endpoint = attrs.Attributes["QueueArn"]
		}
		_, err := client.Subscribe(ctx, &sns.SubscribeInput{TopicArn: out.TopicArn, Protocol: aws.String("sqs"), Endpoint: &endpoint,
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(sub.raw)}})
		require.NoError(t, err)
	}
	return fo
}

func (e *fanout) relay() *outbox.Relay {
	return &outbox.Relay{DB: e.db, SQS: e.sqs, SNS: e.sns, Table: e.table}
}

// unwrapped is received with SNS's envelope opened: per group the
// published bodies, and each one's idempotency-key from the envelope.
func (e *fanout) unwrapped(t *testing.T, queue string) (bodies map[string][]string, keys map[string]string) {
	t.Helper()
	ctx := context.Background()
	raw := map[string][]string{}
	for {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			raw[m.Attributes["MessageGroupId"]] = append(raw[m.Attributes["MessageGroupId"]], aws.ToString(m.Body))
			_, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	bodies, keys = map[string][]string{}, map[string]string{}
	for g, envs := range raw {
		for _, s := range envs {
			var env struct {
				Type, TopicArn, Message string
				MessageAttributes       map[string]struct{ Type, Value string }
			}
			require.NoError(t, json.Unmarshal([]byte(s), &env), "raw delivery off: SNS's JSON envelope")
			require.Equal(t, "Notification", env.Type)
			require.Equal(t, e.topic, env.TopicArn)
			bodies[g] = append(bodies[g], env.Message)
			keys[env.Message] = env.MessageAttributes[outbox.IdempotencyKeyAttribute].Value
		}
	}
	return bodies, keys
}

// TestRelayPublishesToATopic: messages written to a FIFO topic reach every
// subscribed queue, each group in order, with the deduplication id and
// idempotency-key the relay sends to a queue; a second sweep publishes
// nothing; a topic's messages and a queue's go in one sweep.
func TestRelayPublishesToATopic(t *testing.T) {
	eachFanout(t, func(t *testing.T, e *fanout) {
		ctx := context.Background()
		ob := outbox.New(e.db, e.table)
		for i := 1; i <= 4; i++ {
			require.NoError(t, ob.Write(ctx, []outbox.Message{
				{TopicARN: e.topic, Group: "a", Body: fmt.Sprint("a", i), ID: fmt.Sprint("a", i), Attributes: map[string]string{"kind": "deposit"}},
				{TopicARN: e.topic, Group: "b", Body: fmt.Sprint("b", i), ID: fmt.Sprint("b", i)},
			}))
		}
		r := e.relay()
		round, err := r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Groups)
		require.Equal(t, 8, round.Published)
		require.Zero(t, round.Errors)
		round, err = r.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, outbox.Round{}, round, "drained")

		want := map[string][]string{"a": {"a1", "a2", "a3", "a4"}, "b": {"b1", "b2", "b3", "b4"}}
		bodies, keys := e.received(t, e.raw)
		require.Equal(t, want, bodies, "raw delivery: the published bodies, each group in order")
		require.Equal(t, outbox.Key("a", "a1"), keys["a1"])
		bodies, keys = e.unwrapped(t, e.enved)
		require.Equal(t, want, bodies, "the envelope's Message, each group in order")
		require.Equal(t, outbox.Key("b", "b3"), keys["b3"], "the idempotency-key in the envelope's attributes")
	})
}

// TestRelayTopicBatchesWithinSNSLimits: PublishBatch takes 256 KiB
// together, a quarter of SendMessageBatch's: messages of many groups that
// one SendMessageBatch would carry go in several PublishBatch requests,
// none refused.
func TestRelayTopicBatchesWithinSNSLimits(t *testing.T) {
	ctx := context.Background()
	q := memsqs.New()
	stub := newSNSStub(q)
	e := newFanout(t, newEnv(t, memdynamo.New(), q), stub, false)
	ob := outbox.New(e.db, e.table)
	big := strings.Repeat("x", 100*1024)
	var msgs []outbox.Message
	for g := range 6 {
		msgs = append(msgs, outbox.Message{TopicARN: e.topic, Group: fmt.Sprint("g", g), Body: big + fmt.Sprint(g)})
	}
	require.NoError(t, ob.Write(ctx, msgs))
	round, err := e.relay().Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, round.Published)
	require.Zero(t, round.Errors+round.Held)
	require.Equal(t, []int{2, 2, 2}, stub.calls, "two of 100 KiB a request")
}

// TestRelayWithoutSNSClient: a topic's group waits, as an error of the
// round, when the relay has no SNS client; a queue's groups go on.
func TestRelayWithoutSNSClient(t *testing.T) {
	ctx := context.Background()
	q := memsqs.New()
	e := newFanout(t, newEnv(t, memdynamo.New(), q), newSNSStub(q), false)
	ob := outbox.New(e.db, e.table)
	require.NoError(t, ob.Write(ctx, []outbox.Message{{TopicARN: e.topic, Group: "a", Body: "t1"}, {QueueURL: e.q1, Group: "a", Body: "q1"}}))
	r := e.relay()
	r.SNS = nil
	round, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, round.Published, "the queue's message")
	require.Equal(t, 1, round.Errors, "the topic's group, left for the next round")
	r.SNS = e.sns
	round, err = r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, round.Published)
}

// TestWriteChecksATopicDestination: one destination, a topic ARN that is
// one, a FIFO topic's Group; SNS's limits as SQS's.
func TestWriteChecksATopicDestination(t *testing.T) {
	ctx := context.Background()
	ob := outbox.New(memdynamo.New(), "t")
	const topic = "arn:aws:sns:eu-west-1:123456789012:orders.fifo"
	for _, c := range []struct {
		m    outbox.Message
		want string
	}{
		{outbox.Message{TopicARN: topic, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo", Group: "g", Body: "x"}, "both QueueURL and TopicARN"},
		{outbox.Message{TopicARN: "arn:aws:sqs:eu-west-1:123456789012:orders.fifo", Group: "g", Body: "x"}, "not an SNS topic ARN"},
		{outbox.Message{TopicARN: "orders.fifo", Group: "g", Body: "x"}, "not an SNS topic ARN"},
		{outbox.Message{TopicARN: topic, Body: "x"}, "a FIFO topic's message needs a Group"},
		{outbox.Message{TopicARN: topic, Group: "g", Body: strings.Repeat("x", outbox.MaxBodyBytes)}, "SNS takes at most"},
	} {
		err := ob.Write(ctx, []outbox.Message{c.m})
		require.ErrorIs(t, err, outbox.ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	require.True(t, outbox.IsTopicARN(topic))
	require.True(t, outbox.IsTopicARN("arn:aws-cn:sns:cn-north-1:123456789012:plain"))
	require.False(t, outbox.IsTopicARN("https://sqs.eu-west-1.amazonaws.com/123456789012/q"), "a stored destination of before is a queue")
}
