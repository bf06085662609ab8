package chaos

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTracerDecodesMessageEvents(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	tr := NewTracer(&buf)
	sqsObs, ddbObs := tr.Observer("w1", "sqs"), tr.Observer("w2", "dynamodb")
	sqsObs(Exchange{Op: "ReceiveMessage", Fault: LostAck, Status: 200, Request: []byte(`{}`), Response: []byte(`{"Messages":[
		{"MessageId":"m1","ReceiptHandle":"r1","Attributes":{"MessageGroupId":"g1","ApproximateReceiveCount":"2","SequenceNumber":"7"},
		 "MessageAttributes":{"idempotency-key":{"DataType":"String","StringValue":"k-g1-1"}}}]}`)})
	sqsObs(Exchange{Op: "ChangeMessageVisibilityBatch", Fault: Pass, Status: 200,
		Request:  []byte(`{"Entries":[{"Id":"0","ReceiptHandle":"r1","VisibilityTimeout":6},{"Id":"1","ReceiptHandle":"zz","VisibilityTimeout":0}]}`),
		Response: []byte(`{"Successful":[{"Id":"0"}],"Failed":[{"Id":"1","Code":"ReceiptHandleIsInvalid"}]}`)})
	sqsObs(Exchange{Op: "DeleteMessage", Fault: Reset, Request: []byte(`{"ReceiptHandle":"r1"}`)})
	sqsObs(Exchange{Op: "SendMessage", Fault: LostAck, Status: 200, Response: []byte(`{"MessageId":"x"}`),
		Request: []byte(`{"QueueUrl":"http://127.0.0.1:1/000000000000/q-dlq.fifo","MessageBody":"{}","MessageGroupId":"g1","MessageDeduplicationId":"d1",
		"MessageAttributes":{"idempotency-key":{"DataType":"String","StringValue":"k-g1-1"}}}`)})
	ddbObs(Exchange{Op: "PutItem", Fault: Pass, Status: 400,
		Request:  []byte(`{"Item":{"pk":{"S":"exactly#q.fifo#k-g1-1"},"token":{"S":"abcdef123"},"attempts":{"N":"2"}}}`),
		Response: []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Item":{"status":{"S":"IN_PROGRESS"},"token":{"S":"999999aa"},"lease_until":{"N":"17"}}}`)})
	ddbObs(Exchange{Op: "UpdateItem", Fault: Pass, Status: 200,
		Request: []byte(`{"Key":{"pk":{"S":"exactly#q.fifo#k-g1-1"}},"UpdateExpression":"SET #lu = :lu","ExpressionAttributeValues":{":lu":{"N":"0"},":tok":{"S":"abcdef123"}}}`), Response: []byte(`{}`)})
	ddbObs(Exchange{Op: "TransactWriteItems", Fault: Pass, Status: 400,
		Request:  []byte(`{"TransactItems":[{"Update":{"Key":{"pk":{"S":"exactly#q.fifo#k-g1-1"}},"ExpressionAttributeValues":{":tok":{"S":"abcdef123"}}}},{"Put":{}}]}`),
		Response: []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","CancellationReasons":[{"Code":"ConditionalCheckFailed"},{"Code":"None"}]}`)})
	require.NoError(t, tr.Flush())
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		got = append(got, l[len("15:04:05.000 "):])
	}
	require.Equal(t, []string{
		"w1 lost-ack receive k-g1-1 m1 group=g1 rc=2 seq=7",
		"w1 pass visibility k-g1-1 m1 to=6s",
		"w1 pass visibility ? ? to=0s failed=ReceiptHandleIsInvalid",
		"w1 reset delete k-g1-1 m1",
		"w1 lost-ack send k-g1-1 to=q-dlq.fifo group=g1 dedup=d1 -> ok",
		"w2 pass claim k-g1-1 token=abcdef attempts=2 -> ConditionalCheckFailedException(400) (held: IN_PROGRESS token=999999 lease_until=17)",
		"w2 pass release k-g1-1 token=abcdef -> ok",
		"w2 pass commit k-g1-1 token=abcdef -> TransactionCanceledException(400)[ConditionalCheckFailed,None]",
	}, got)
	require.Len(t, History(buf.String(), "k-g1-1", 100), 7)
}

func TestExercised(t *testing.T) {
	t.Parallel()
	trace := strings.Join([]string{
		"15:52:06.522 w2 pass+held commit k-1 token=b71e74 -> TransactionCanceledException(400)[ConditionalCheckFailed,ConditionalCheckFailed,ConditionalCheckFailed]",
		"15:52:06.600 w2 pass commit k-2 token=b71e74 -> TransactionCanceledException(400)[None,ConditionalCheckFailed,None]",
		"15:52:06.700 w2 pass commit k-3 token=b71e74 -> TransactionCanceledException(400)[None,None,ConditionalCheckFailed]",
		"15:52:06.800 w2 lost-ack commit k-4 token=b71e74 -> ok",
		"15:52:06.900 w1 lost-ack claim k-5 token=aaaaaa attempts=1 -> ok",
		"15:52:07.000 w1 pass claim k-5 token=bbbbbb attempts=2 -> ConditionalCheckFailedException(400) (held: IN_PROGRESS token=aaaaaa lease_until=1)",
		"15:52:08.000 w1 pass claim k-5 token=cccccc attempts=3 -> ok",
		"15:52:09.000 w1 pass claim k-5 token=dddddd attempts=4 -> ConditionalCheckFailedException(400) (held: COMPLETED token=cccccc lease_until=1)",
		"15:52:09.100 w1 lost-ack delete k-5 m5",
		"15:52:09.200 w1 lost-ack receive k-6 m6 group=g rc=1 seq=1",
		"15:52:09.300 w1 lost-ack send k-7 to=q-dlq.fifo group=g dedup=d -> ok",
		"",
	}, "\n")
	require.Equal(t, map[string]int{
		PathFencedCommit: 1, PathHeldCommit: 1, PathOrderRefused: 1, PathEntryExists: 1, PathLostAckCommit: 1,
		PathLostAckClaim: 1, PathBusy: 1, PathTakeover: 1, PathDuplicate: 1, PathLostAckDelete: 1, PathLostReceive: 1,
		PathDLQSendLost: 1,
	}, Exercised(trace))
}
