package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// losingSQS loses the answer of the first receive that takes messages: the
// queue hands them out, and the call waits for its context to end and
// answers its error, as a poll cancelled while SQS was answering does. When
// refuse is set, a receive that repeats that attempt id gets refuse.
type losingSQS struct {
	SQS
	lost    atomic.Bool
	attempt atomic.Value // the lost receive's attempt id
	refuse  error
	retries atomic.Int32 // receives that repeated the lost attempt id
}

func (l *losingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if a, ok := l.attempt.Load().(string); ok && a == aws.ToString(in.ReceiveRequestAttemptId) {
		l.retries.Add(1)
		if l.refuse != nil {
			return nil, l.refuse
		}
	}
	out, err := l.SQS.ReceiveMessage(ctx, in, o...)
	if err == nil && len(out.Messages) > 0 && !l.lost.Swap(true) {
		l.attempt.Store(aws.ToString(in.ReceiveRequestAttemptId))
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return out, err
}

// forceDuringLostAnswer runs a FIFO pool whose first receive of group A's
// three messages loses its answer, then stops it and forces the stop (a
// second signal), which cancels that poll.
func forceDuringLostAnswer(t *testing.T, refuse error) (*testBundle, *losingSQS) {
	// One receiver: another one's poll, cancelled too, would go on inside
	// the queue (as on SQS) and take what this stop hands back.
	b := setup(t, options{fifo: true, queue: func(q *Queue) { q.Receivers = 1 },
		config: func(c *Config) { c.WaitTime = 20 * time.Second }})
	l := &losingSQS{SQS: b.rec, refuse: refuse}
	b.cfg.Client = l
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		t.Errorf("%s ran: its receive's answer was lost", m.Body)
		return deleted()
	}
	b.start(t)
	synctest.Wait()
	b.sendFIFOAtOnce(t, "A", "a1", "a2", "a3")
	synctest.Wait() // the poll took all three; its answer waits for the cancel
	require.True(t, l.lost.Load())
	b.cancel()
	b.pool.Force()
	select {
	case <-b.done:
	case <-time.After(time.Second):
		t.Fatal("a forced stop did not end within a second")
	}
	return b, l
}

// TestAForcedStopGetsBackWhatItsCancelledPollTook: a poll cancelled by a
// forced stop had taken messages (SQS handed them out; the answer never
// came). The pool asks again with the poll's attempt id and hands them
// back: the next worker receives them at once, in group order, instead of
// after the visibility timeout.
func TestAForcedStopGetsBackWhatItsCancelledPollTook(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, l := forceDuringLostAnswer(t, nil)
		require.Equal(t, int32(1), l.retries.Load(), "one receive with the cancelled poll's attempt id")
		v, nv := b.counts(t, b.url)
		require.Zero(t, nv, "nothing left hidden")
		require.Equal(t, 3, v)
		var names []string
		for _, m := range b.receiveNow(t, b.url) {
			names = append(names, aws.ToString(m.Body))
		}
		require.Equal(t, []string{"a1", "a2", "a3"}, names, "received again at once, in group order")
		require.Contains(t, b.logs.String(), "got back what it took")
	})
}

// TestARefusedAttemptIDEndsTheStopAndSaysWhatStaysHidden: SQS refuses the
// attempt id (not retryable, as after a throttled receive). The stop still
// ends, and the log says the messages stay hidden and for how long.
func TestARefusedAttemptIDEndsTheStopAndSaysWhatStaysHidden(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("InvalidParameterValue: The receiveRequestAttemptId is not valid anymore since the receive call is not retryable")
		b, l := forceDuringLostAnswer(t, refused)
		require.Equal(t, int32(1), l.retries.Load(), "asked once, not again and again")
		_, nv := b.counts(t, b.url)
		require.Equal(t, 3, nv, "hidden: SQS would not give them back")
		logs := b.logs.String()
		require.Contains(t, logs, "cannot be asked back")
		require.Contains(t, logs, "hidden_up_to_ms=30000")
		require.Contains(t, logs, "not retryable")
	})
}
