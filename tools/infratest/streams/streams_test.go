// Package streams_test checks, against DynamoDB Local and fauxqs, what the
// relay's Lambda mode rests on: the outbox table's stream (KEYS_ONLY) names
// every message's group in its records' keys, and draining the groups a
// batch of records names publishes their messages in commit order. It lives
// in the tools module because the DynamoDB Streams client is test tooling
// here: the relay itself gets its records from Lambda.
package streams_test

import (
	"context"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

func TestStreamRecordsDrainTheGroups(t *testing.T) {
	ctx := context.Background()
	db := testenv.DynamoDB(t)
	sq := testenv.SQS(t)
	cfg := testenv.Config(t)
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = db.Options().BaseEndpoint
	})
	table := testenv.Name("outbox")
	_, err := db.CreateTable(ctx, outboxschema.CreateTableInput(table))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	url, _ := testenv.NewQueue(t, sq, true, nil, 0)

	ob := outbox.New(db, table)
	for i := 1; i <= 3; i++ {
		require.NoError(t, ob.Write(ctx, []outbox.Message{{QueueURL: url, Group: "a", Body: fmt.Sprint("a", i)}, {QueueURL: url, Group: "b", Body: fmt.Sprint("b", i)}}))
	}

	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	require.NoError(t, err)
	arn := d.Table.LatestStreamArn
	require.NotNil(t, arn, "the outbox table has a stream")
	desc, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	require.NoError(t, err)
	require.Equal(t, st.StreamViewTypeKeysOnly, desc.StreamDescription.StreamViewType)
	var pks []string
	inserts := 0
	for _, sh := range desc.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: st.ShardIteratorTypeTrimHorizon})
		require.NoError(t, err)
		recs, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		require.NoError(t, err)
		for _, r := range recs.Records {
			pk, ok := r.Dynamodb.Keys[outboxschema.AttrPK].(*st.AttributeValueMemberS)
			require.True(t, ok, "every record carries the partition key")
			pks = append(pks, pk.Value)
			if r.EventName == st.OperationTypeInsert {
				inserts++
			}
		}
	}
	// Six messages are six inserts (the heads' first writes are inserts too).
	require.GreaterOrEqual(t, inserts, 6)
	require.ElementsMatch(t, []string{url + "#a", url + "#b"}, dedupe(pks))

	round, err := (&outbox.Relay{DB: db, SQS: sq, Table: table}).Drain(ctx, pks)
	require.NoError(t, err)
	require.Equal(t, 6, round.Published)
	got := map[string][]string{}
	for {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId}})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			got[m.Attributes["MessageGroupId"]] = append(got[m.Attributes["MessageGroupId"]], aws.ToString(m.Body))
			_, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	require.Equal(t, map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1", "b2", "b3"}}, got)
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
