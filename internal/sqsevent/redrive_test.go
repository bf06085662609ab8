package sqsevent

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// countingObserver counts what the handler tells an Observer.
type countingObserver struct {
	mu        sync.Mutex
	nearLimit map[string]int
}

func (o *countingObserver) Received(string, int)                       {}
func (o *countingObserver) Done(string, process.Result, time.Duration) {}
func (o *countingObserver) ReturnedNearRedrive(queue string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.nearLimit == nil {
		o.nearLimit = map[string]int{}
	}
	o.nearLimit[queue] += n
}

func (o *countingObserver) near(queue string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nearLimit[queue]
}

func received(m events.SQSMessage, count int) events.SQSMessage {
	m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(count)
	return m
}

// redriveSetup: a handler whose queues have a redrive policy with
// maxReceiveCount maxRC, and an Observer that counts.
func redriveSetup(t *testing.T, maxRC int) (*Handler, *bundle, *countingObserver) {
	t.Helper()
	obs := &countingObserver{}
	h, b := setup(t, func(c *Config) {
		c.Observer = obs
		c.Resolve = func(context.Context, string) (Queue, error) { return Queue{MaxReceiveCount: maxRC}, nil }
	})
	return h, b, obs
}

// TestReturnedUnstartedNearTheRedriveLimit: a message handed back without
// being started (behind a failed message of its group) with at most one
// receive left before the redrive policy moves it is logged at WARN and
// counted; one with more left is not, and neither is the failed message
// itself, which spent its receive on its own attempt.
func TestReturnedUnstartedNearTheRedriveLimit(t *testing.T) {
	t.Parallel()
	h, b, obs := redriveSetup(t, 5)
	got := invoke(t, h, time.Minute,
		received(msg(fifoARN, "a1", "A", "flaky", 1), 5),
		received(msg(fifoARN, "a2", "A", "a2", 2), 4), // one receive left
		received(msg(fifoARN, "a3", "A", "a3", 3), 5), // none left
		received(msg(fifoARN, "a4", "A", "a4", 4), 3), // two left
	)
	require.Equal(t, []string{"a1", "a2", "a3", "a4"}, got)
	require.Equal(t, []string{"a1"}, b.eff.ids())
	require.Equal(t, 2, obs.near("orders.fifo"))
	warns := b.logs.lines(nearRedriveMsg)
	require.Len(t, warns, 2)
	byID := map[string]map[string]any{}
	for _, w := range warns {
		require.Equal(t, "WARN", w["level"])
		byID[w["message_id"].(string)] = w
	}
	require.EqualValues(t, 4, byID["a2"]["receive_count"])
	require.EqualValues(t, 5, byID["a2"]["max_receive_count"])
	require.EqualValues(t, 1, byID["a2"]["receives_left"])
	require.EqualValues(t, 0, byID["a3"]["receives_left"])
}

// TestReturnedUnstartedAtTheDeadlineNearTheRedriveLimit: the same for a
// message not started because the invocation had too little time left.
func TestReturnedUnstartedAtTheDeadlineNearTheRedriveLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, b, obs := redriveSetup(t, 10)
		b.eff.apply = func(context.Context, effect.Input) error {
			time.Sleep(2600 * time.Millisecond)
			return nil
		}
		// 8 s, less the 2 s margin: a1 runs 2.6 s, a2 starts with 3.4 s
		// left and runs 2.6 s; a3 is not started (0.8 s < MinLease left).
		got := invoke(t, h, 8*time.Second,
			received(msg(fifoARN, "a1", "A", "a1", 1), 1),
			received(msg(fifoARN, "a2", "A", "a2", 2), 2),
			received(msg(fifoARN, "a3", "A", "a3", 3), 9),
		)
		require.Equal(t, []string{"a3"}, got)
		require.Equal(t, 1, obs.near("orders.fifo"))
		require.Len(t, b.logs.lines(nearRedriveMsg), 1)
	})
}

// TestNoRedriveLimitKnownNoWarning: without a redrive policy (or an answer
// of Resolve), nothing is near a limit.
func TestNoRedriveLimitKnownNoWarning(t *testing.T) {
	t.Parallel()
	h, b, obs := redriveSetup(t, 0)
	invoke(t, h, time.Minute,
		received(msg(fifoARN, "a1", "A", "flaky", 1), 50),
		received(msg(fifoARN, "a2", "A", "a2", 2), 50))
	require.Zero(t, obs.near("orders.fifo"))
	require.Empty(t, b.logs.lines(nearRedriveMsg))
}

// TestBatchOfOneGroupAsLongAsTheRedriveLimit: a FIFO batch holding as many
// messages of one group as the queue's maxReceiveCount breaks the rule
// that keeps the tail from being dead-lettered unrun; the handler says so
// at WARN, once per queue for the container's life.
func TestBatchOfOneGroupAsLongAsTheRedriveLimit(t *testing.T) {
	t.Parallel()
	h, b, _ := redriveSetup(t, 3)
	short := []events.SQSMessage{msg(fifoARN, "a1", "A", "a1", 1), msg(fifoARN, "a2", "A", "a2", 2), msg(fifoARN, "b1", "B", "b1", 3)}
	require.Empty(t, invoke(t, h, time.Minute, short...))
	require.Empty(t, b.logs.lines(batchAtRedriveMsg), "2 of a group < 3")

	long := []events.SQSMessage{msg(fifoARN, "c1", "C", "c1", 4), msg(fifoARN, "c2", "C", "c2", 5), msg(fifoARN, "c3", "C", "c3", 6)}
	require.Empty(t, invoke(t, h, time.Minute, long...))
	require.Empty(t, invoke(t, h, time.Minute, msg(fifoARN, "d1", "D", "d1", 7), msg(fifoARN, "d2", "D", "d2", 8), msg(fifoARN, "d3", "D", "d3", 9)))
	warns := b.logs.lines(batchAtRedriveMsg)
	require.Len(t, warns, 1, "once per queue")
	require.Equal(t, "WARN", warns[0]["level"])
	require.EqualValues(t, 3, warns[0]["messages_in_order"])
	require.EqualValues(t, 3, warns[0]["max_receive_count"])

	// A standard queue keeps no group order: no tail waits behind a head.
	require.Empty(t, invoke(t, h, time.Minute, msg(standardARN, "s1", "", "s1", 0), msg(standardARN, "s2", "", "s2", 0), msg(standardARN, "s3", "", "s3", 0)))
	require.Len(t, b.logs.lines(batchAtRedriveMsg), 1)
}
