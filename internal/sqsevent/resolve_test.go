package sqsevent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
)

// TestResolveScopesTheQueue: Config.Resolve's answer scopes the keys of a
// queue's messages (PerGroup) whatever the Processor's Scope says, and gives
// effects the queue's URL; it is asked once per queue of a batch; when it
// fails, the queue's records are reported and nothing of them runs.
func TestResolveScopesTheQueue(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	failing := true
	urls := map[string]string{}
	h, b := setup(t, func(c *Config) {
		c.Resolve = func(_ context.Context, arn string) (Queue, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[arn]++
			if arn == standardARN && failing {
				return Queue{}, errors.New("AccessDenied")
			}
			return Queue{URL: "http://sqs.local/" + QueueName(arn), PerGroup: arn == fifoARN}, nil
		}
	})
	b.eff.apply = func(_ context.Context, in effect.Input) error {
		mu.Lock()
		urls[in.Message.ID] = in.Message.QueueURL
		mu.Unlock()
		return nil
	}
	// One dedup id in two groups: two messages of a messageGroup-scoped
	// queue (the processor's own Scope would key them as one).
	a, c := msg(fifoARN, "a1", "A", "one", 1), msg(fifoARN, "b1", "B", "two", 2)
	a.Attributes["MessageDeduplicationId"] = "same"
	c.Attributes["MessageDeduplicationId"] = "same"
	s1 := msg(standardARN, "s1", "", "s", 0)
	require.Equal(t, []string{"s1"}, invoke(t, h, time.Minute, a, c, s1))
	require.ElementsMatch(t, []string{"a1", "b1"}, b.eff.ids(), "both groups applied; the unresolved queue's record did not run")
	require.Equal(t, "http://sqs.local/orders.fifo", urls["a1"])
	require.Equal(t, map[string]int{fifoARN: 1, standardARN: 1}, calls, "once per queue of the batch")
	require.Len(t, b.logs.lines("cannot read the queue's attributes: its messages are reported, to come back"), 1)

	mu.Lock()
	failing = false
	mu.Unlock()
	require.Empty(t, invoke(t, h, time.Minute, s1))
	require.Contains(t, b.eff.ids(), "s1")
}
