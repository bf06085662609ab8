package redrive_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/testenv"
)

type client interface {
	redrive.SQS
	testenv.QueueAdmin
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// both runs a test against the in-memory SQS and against the emulator.
func both(t *testing.T, f func(t *testing.T, c client)) {
	t.Run("memory", func(t *testing.T) { t.Parallel(); f(t, memsqs.New()) })
	t.Run("emulator", func(t *testing.T) { t.Parallel(); f(t, testenv.SQS(t)) })
}

func str(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func sendFIFO(t *testing.T, c client, url, group, dedupID, body string, attrs map[string]types.MessageAttributeValue) {
	t.Helper()
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: &url, MessageBody: &body, MessageGroupId: &group, MessageDeduplicationId: &dedupID, MessageAttributes: attrs,
	})
	require.NoError(t, err)
}

// drain receives everything visible in url, deleting it, in receive order.
func drain(t *testing.T, c client, url string) []types.Message {
	t.Helper()
	var all []types.Message
	for {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			_, err := c.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: &url,
				Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: m.ReceiptHandle}}})
			require.NoError(t, err)
		}
		all = append(all, out.Messages...)
	}
}

// TestRedriveKeepsGroupsKeysAndOrder: every message goes back in its
// group's order, with its body and attributes, and with its dedup key in
// idempotency-key: the producer's own, else the dedup id auto read. The
// original dedup id was used in the queue moments ago; the copy gets a new
// one, so SQS's window does not drop it.
func TestRedriveKeepsGroupsKeysAndOrder(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		sendFIFO(t, c, url, "A", "a1", "used", nil)
		require.Len(t, drain(t, c, url), 1) // a1 ran (and failed) within the window
		sendFIFO(t, c, dlq, "A", "a1", "A1", map[string]types.MessageAttributeValue{"tenant": str("t")})
		sendFIFO(t, c, dlq, "A", "a2", "A2", map[string]types.MessageAttributeValue{"idempotency-key": str("k-a2")})
		sendFIFO(t, c, dlq, "B", "b1", "B1", nil)
		sendFIFO(t, c, dlq, "A", "a3", "A3", nil)

		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second})
		require.NoError(t, err)
		require.Equal(t, 4, res.Moved)
		require.Empty(t, drain(t, c, dlq), "the dead-letter queue is empty")

		got := drain(t, c, url)
		byGroup := map[string][]string{}
		keys := map[string]string{}
		for _, m := range got {
			body := aws.ToString(m.Body)
			byGroup[m.Attributes["MessageGroupId"]] = append(byGroup[m.Attributes["MessageGroupId"]], body)
			keys[body] = aws.ToString(m.MessageAttributes["idempotency-key"].StringValue)
			require.True(t, strings.HasPrefix(m.Attributes["MessageDeduplicationId"], "redrive-"), "a fresh dedup id")
			if body == "A1" {
				require.Equal(t, "t", aws.ToString(m.MessageAttributes["tenant"].StringValue), "attributes are kept")
			}
		}
		require.Equal(t, map[string][]string{"A": {"A1", "A2", "A3"}, "B": {"B1"}}, byGroup)
		require.Equal(t, map[string]string{"A1": "a1", "A2": "k-a2", "B1": "b1", "A3": "a3"}, keys)
	})
}

func TestRedriveStopsAtMax(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		for i := range 5 {
			sendFIFO(t, c, dlq, "A", fmt.Sprint(i), fmt.Sprint(i), nil)
		}
		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Max: 2, Wait: time.Second})
		require.NoError(t, err)
		require.Equal(t, 2, res.Moved)
		require.Len(t, drain(t, c, url), 2)
	})
}

// TestRedriveStopsAtAMessageThatCannotKeepItsKey: with ten attributes and no
// idempotency-key, a copy would lose the key: it stays, and so does the rest
// of the batch after it; what came before is moved.
func TestRedriveStopsAtAMessageThatCannotKeepItsKey(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, dlq := testenv.NewQueue(t, c, true, nil, 3)
	full := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		full[fmt.Sprint("a", i)] = str("v")
	}
	sendFIFO(t, c, dlq, "A", "a1", "A1", nil)
	sendFIFO(t, c, dlq, "A", "a2", "A2", full)
	sendFIFO(t, c, dlq, "A", "a3", "A3", nil)
	res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Visibility: time.Second})
	require.ErrorIs(t, err, redrive.ErrCannotCarryKey)
	require.Equal(t, 1, res.Moved)
	require.Len(t, drain(t, c, url), 1)
	time.Sleep(1100 * time.Millisecond) // the visibility of what stayed
	require.Len(t, drain(t, c, dlq), 2, "A2 and A3 stay in the dead-letter queue")
}

func TestRedriveRefusesMixedQueueTypes(t *testing.T) {
	t.Parallel()
	_, err := redrive.Run(context.Background(), memsqs.New(), redrive.Config{DLQ: "http://x/1/dlq.fifo", Queue: "http://x/1/q"})
	require.Error(t, err)
	require.NotErrorIs(t, err, redrive.ErrCannotCarryKey)
	require.Contains(t, err.Error(), "FIFO")
}

// TestRedriveLeavesWhatArrivedAfterItsStart: a message that fails again
// while the redrive runs comes back to the DLQ as a new message; it is left
// there (visible again at the end), or a live worker and the redrive would
// pass a poison message back and forth for ever.
func TestRedriveLeavesWhatArrivedAfterItsStart(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		sendFIFO(t, c, dlq, "A", "a1", "A1", nil)
		sendFIFO(t, c, dlq, "B", "b1", "B1", nil)
		time.Sleep(20 * time.Millisecond)
		before := time.Now()
		time.Sleep(20 * time.Millisecond)
		sendFIFO(t, c, dlq, "C", "c1", "C1", nil) // dead-lettered again meanwhile
		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Before: before})
		require.NoError(t, err)
		require.Equal(t, redrive.Result{Moved: 2, Left: 1}, res)
		require.Len(t, drain(t, c, url), 2)
		stay := drain(t, c, dlq)
		require.Len(t, stay, 1, "visible again at once")
		require.Equal(t, "C1", aws.ToString(stay[0].Body))
	})
}

// TestRedriveStandardQueue: no group, no dedup id; the key auto read was the
// message id, which the copy carries.
func TestRedriveStandardQueue(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, false, nil, 3)
		ids := map[string]string{}
		for _, body := range []string{"s1", "s2"} {
			out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(body)})
			require.NoError(t, err)
			ids[body] = aws.ToString(out.MessageId)
		}
		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second})
		require.NoError(t, err)
		require.Equal(t, 2, res.Moved)
		keys := map[string]string{}
		for _, m := range drain(t, c, url) {
			keys[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["idempotency-key"].StringValue)
		}
		require.Equal(t, ids, keys)
	})
}

// TestRedriveDryRunListsInOrder: a dry run lists what would move, in the
// order it would, with the key the copy would carry and why the message
// failed; it moves and deletes nothing, and the messages are visible
// again when it ends.
func TestRedriveDryRunListsInOrder(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		sendFIFO(t, c, dlq, "A", "a1", "A1", map[string]types.MessageAttributeValue{"exactly-failure": str("ledger body has no \"account\""), "exactly-failed-at": str("2026-11-25T02:30:00Z")})
		sendFIFO(t, c, dlq, "B", "b1", "B1", nil)
		sendFIFO(t, c, dlq, "A", "a2", "A2", map[string]types.MessageAttributeValue{"idempotency-key": str("k-a2")})
		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, DryRun: true})
		require.NoError(t, err)
		require.Zero(t, res.Moved)
		byGroup := map[string][]string{}
		for _, l := range res.Listed {
			byGroup[l.Group] = append(byGroup[l.Group], l.Key)
			require.False(t, l.SentAt.IsZero())
		}
		// SQS hands out no more of a FIFO group while some of it is held:
		// a group is listed from its first message on, as far as the
		// receives reach (the in-memory SQS returns all of it at once,
		// fauxqs one message a group).
		require.Equal(t, []string{"b1"}, byGroup["B"])
		require.NotEmpty(t, byGroup["A"])
		require.Equal(t, []string{"a1", "k-a2"}[:len(byGroup["A"])], byGroup["A"], "each group in its order, with its key")
		for _, l := range res.Listed {
			if l.Key == "a1" {
				require.Equal(t, `ledger body has no "account"`, l.Failure)
				require.Equal(t, "2026-11-25T02:30:00Z", l.FailedAt)
			}
		}
		require.Empty(t, drain(t, c, url), "nothing moved")
		require.Len(t, drain(t, c, dlq), 3, "all still in the dead-letter queue, visible again")
	})
}

// TestRedriveOneGroup: only the groups asked for move, in order; the
// others stay, visible again; the copies leave the failure attributes
// behind.
func TestRedriveOneGroup(t *testing.T) {
	both(t, func(t *testing.T, c client) {
		url, dlq := testenv.NewQueue(t, c, true, nil, 3)
		fail := map[string]types.MessageAttributeValue{"exactly-failure": str("downstream 422"), "exactly-failed-at": str("2026-11-25T02:30:00Z"), "tenant": str("t")}
		sendFIFO(t, c, dlq, "A", "a1", "A1", fail)
		sendFIFO(t, c, dlq, "B", "b1", "B1", nil)
		sendFIFO(t, c, dlq, "A", "a2", "A2", nil)
		sendFIFO(t, c, dlq, "C", "c1", "C1", nil)
		res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Groups: []string{"A", "C"}})
		require.NoError(t, err)
		require.Equal(t, 3, res.Moved)
		require.Equal(t, 1, res.Skipped)
		var bodies []string
		for _, m := range drain(t, c, url) {
			bodies = append(bodies, aws.ToString(m.Body))
			if aws.ToString(m.Body) == "A1" {
				require.NotContains(t, m.MessageAttributes, "exactly-failure", "the failure stays behind")
				require.NotContains(t, m.MessageAttributes, "exactly-failed-at")
				require.Equal(t, "t", aws.ToString(m.MessageAttributes["tenant"].StringValue))
			}
		}
		require.ElementsMatch(t, []string{"A1", "A2", "C1"}, bodies)
		require.Less(t, slices.Index(bodies, "A1"), slices.Index(bodies, "A2"), "group order kept")
		left := drain(t, c, dlq)
		require.Len(t, left, 1)
		require.Equal(t, "B1", aws.ToString(left[0].Body))
	})
}

// TestRedriveSizesItsBatches: ten groups whose next messages are 200 KiB
// each pass SQS's 1 MiB limit for one SendMessageBatch together: SQS
// refuses the whole request (BatchRequestTooLong), and a redrive that puts
// them in one batch moves nothing, however often it is run. Batches are
// sized as they are built (bodies padded to 177 KiB, as the simulation's
// large messages are). In memory: the emulator need not enforce the total.
func TestRedriveSizesItsBatches(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, dlq := testenv.NewQueue(t, c, true, nil, 3)
	big := strings.Repeat("x", 200*1024)
	for g := range 10 {
		sendFIFO(t, c, dlq, fmt.Sprint("g", g), fmt.Sprint("d", g), fmt.Sprint(g, big), nil)
	}
	res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second})
	require.NoError(t, err)
	require.Equal(t, 10, res.Moved)
	require.Len(t, drain(t, c, url), 10)
	require.Empty(t, drain(t, c, dlq))
}
