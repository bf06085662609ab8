package process_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// acceptAll is a DynamoDB that takes every write at once and keeps nothing:
// what remains of a message's cost is the processor's and the ledger's own.
type acceptAll struct{}

func (acceptAll) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (acceptAll) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

func (acceptAll) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (acceptAll) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, errors.New("not used")
}

func (acceptAll) DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return nil, errors.New("not used")
}

// processOptimisticBench is the worker's default path for one message
// (key, payload hash, the effect, the optimistic commit) on a DynamoDB that
// accepts every write, with an effect that returns the same two writes
// every time (the ledger's shape, built once): one call is one message.
func processOptimisticBench(tb testing.TB) func() {
	keys, err := dedup.ParseKeySource("auto")
	if err != nil {
		tb.Fatal(err)
	}
	out := effect.Output{Writes: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct#a"}},
			UpdateExpression: aws.String("ADD balance_cents :amt"), ExpressionAttributeValues: map[string]types.AttributeValue{":amt": &types.AttributeValueMemberN{Value: "1"}}}},
		{Put: &types.Put{TableName: aws.String("ledger"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "entry#k"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}}
	proc := &process.Processor{
		Store: dedup.NewStore(acceptAll{}, "dedup"), Optimistic: true, Keys: keys,
		Effect: effect.Func(func(context.Context, effect.Input) (effect.Output, error) { return out, nil }),
		Scope:  func(m effect.Message) dedup.Scope { return dedup.Scope{Namespace: "bench", Queue: m.QueueName} },
		TTL:    time.Hour, Lease: 30 * time.Second, Log: slog.New(slog.DiscardHandler),
	}
	msgs := make([]effect.Message, 64)
	for i := range msgs {
		id := strconv.Itoa(i)
		msgs[i] = effect.Message{
			QueueURL: "http://localhost/000000000000/q.fifo", QueueName: "q.fifo", ID: id, Group: "g" + id, DedupID: "d" + id,
			Body: `{"account":"a` + id + `","amount_cents":1}`, ReceiveCount: 1,
		}
	}
	held := func() bool { return true }
	hooks := process.Hooks{HeartbeatEvery: 15 * time.Second, Lease: 30 * time.Second, Held: held}
	ctx := context.Background()
	i := 0
	return func() {
		i++
		if r := proc.Process(ctx, msgs[i%len(msgs)], hooks); !r.Applied {
			tb.Fatalf("%s: %v", r.Action, r.Err)
		}
	}
}

// BenchmarkProcessOptimistic is the processor's and the ledger's own cost
// of a message in the worker's default mode: allocs/op and B/op per
// message, without the fakes' or an effect's.
func BenchmarkProcessOptimistic(b *testing.B) {
	process := processOptimisticBench(b)
	b.ReportAllocs()
	for b.Loop() {
		process()
	}
}

// maxProcessAllocs bounds the allocations of one message in the default
// mode, the optimistic commit's included (24 measured: the key, the
// payload hash, the token, the commit's deadline context and timer, and
// the commit's 15: see dedup's TestCommitOptimisticAllocations).
const maxProcessAllocs = 24

// TestProcessOptimisticAllocations guards the processor's allocations per
// message: each is CPU on the hot path and garbage to collect.
func TestProcessOptimisticAllocations(t *testing.T) {
	process := processOptimisticBench(t)
	limit := maxProcessAllocs
	if raceEnabled {
		limit++ // the race detector's instrumentation moves one more value to the heap
	}
	if n := testing.AllocsPerRun(200, process); n > float64(limit) {
		t.Fatalf("a message allocates %.0f times in the processor, more than %d", n, limit)
	}
}
