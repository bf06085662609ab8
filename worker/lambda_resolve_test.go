package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// TestLambdaKeysAnUnlistedQueueAsItDedups: a queue not in WORKER_QUEUES
// whose DeduplicationScope is messageGroup takes the same dedup id in two
// groups as two messages; so must the ledger. Keyed with the default scope
// (queue), the second was a conflict (or busy) and was never applied.
func TestLambdaKeysAnUnlistedQueueAsItDedups(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, _ := memsqs.NewQueue(t, c, true, highThroughput, 0)
	arn := arnOf(t, c, url)
	s, queues := lambdaSettings(t, c) // no --queue
	eff := &ranEffect{}
	h, err := lambdaHandler(s, c, memStore(t), eff, slog.New(slog.DiscardHandler), queues)
	require.NoError(t, err)

	failed := handle(t, h, record(arn, "m-a", "A", "same", "to A"), record(arn, "m-b", "B", "same", "to B"))
	require.Empty(t, failed)
	require.ElementsMatch(t, []string{"to A", "to B"}, eff.bodies(), "both applied")
}

// countingSQS counts the attribute reads and fails the next `fail` GetQueueUrl calls.
type countingSQS struct {
	lambdaSQS
	urls, attrs atomic.Int64
	fail        atomic.Int64
}

func (c *countingSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	c.urls.Add(1)
	if c.fail.Add(-1) >= 0 {
		return nil, errors.New("connection reset")
	}
	return c.lambdaSQS.GetQueueUrl(ctx, in, opts...)
}

func (c *countingSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	c.attrs.Add(1)
	return c.lambdaSQS.GetQueueAttributes(ctx, in, opts...)
}

// TestLambdaReadsAnUnlistedQueueOnce: an unlisted queue's attributes are
// read at its first event and kept; a failed read is not kept (its records
// are reported, to come back) and the next event reads again; a listed
// queue is never read again.
func TestLambdaReadsAnUnlistedQueueOnce(t *testing.T) {
	t.Parallel()
	mem := memsqs.New()
	listedURL, _ := memsqs.NewQueue(t, mem, true, nil, 0)
	url, _ := memsqs.NewQueue(t, mem, true, highThroughput, 0)
	arn, listedARN := arnOf(t, mem, url), arnOf(t, mem, listedURL)
	c := &countingSQS{lambdaSQS: mem}
	s, queues := lambdaSettings(t, c, "--queue", listedURL)
	c.urls.Store(0)
	c.attrs.Store(0)
	eff := &ranEffect{}
	h, err := lambdaHandler(s, c, memStore(t), eff, slog.New(slog.DiscardHandler), queues)
	require.NoError(t, err)

	c.fail.Store(1)
	failed := handle(t, h, record(arn, "m1", "A", "d1", "one"), record(arn, "m2", "A", "d2", "two"))
	require.Len(t, failed, 2, "the queue's scope unknown: nothing runs, everything comes back")
	require.Empty(t, eff.bodies())

	require.Empty(t, handle(t, h, record(arn, "m1", "A", "d1", "one"), record(arn, "m2", "A", "d2", "two")), "read again")
	require.Empty(t, handle(t, h, record(arn, "m3", "B", "d1", "three"), record(listedARN, "m4", "A", "d1", "four")))
	require.ElementsMatch(t, []string{"one", "two", "three", "four"}, eff.bodies())
	require.EqualValues(t, 2, c.urls.Load(), "one failed read, one that is kept")
	require.EqualValues(t, 1, c.attrs.Load(), "the listed queue was read at cold start only")

	// Concurrent first events of another queue share one read.
	other, _ := memsqs.NewQueue(t, mem, true, highThroughput, 0)
	otherARN := arnOf(t, mem, other)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			require.Empty(t, handle(t, h, record(otherARN, "o"+string(rune('a'+i)), "G"+string(rune('a'+i)), "same", "o")))
		})
	}
	wg.Wait()
	require.EqualValues(t, 2, c.attrs.Load())
}
