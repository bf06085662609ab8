package pool

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// Modelled AWS-like latencies (virtual time): an SQS request, and a
// message's effect and commit (one DynamoDB transaction).
const (
	sqsLatency    = 15 * time.Millisecond
	effectLatency = 8 * time.Millisecond
)

// slowSQS holds every call for a fixed latency (in a synctest bubble, virtual
// time) and records when each message finished and when its delete was sent.
type slowSQS struct {
	SQS
	lat time.Duration

	mu        sync.Mutex
	bodyOf    map[string]string    // receipt -> body
	finished  map[string]time.Time // body -> when its processor returned
	deleteAt  map[string]time.Time // body -> when its DeleteMessageBatch was sent
	requests  int                  // ReceiveMessage, DeleteMessageBatch, ChangeMessageVisibilityBatch
	took      time.Duration        // from the start to the last message's end
	maxWait   time.Duration        // longest finish -> delete request
	longestOf string
}

func newSlowSQS(inner SQS, lat time.Duration) *slowSQS {
	return &slowSQS{SQS: inner, lat: lat, bodyOf: map[string]string{}, finished: map[string]time.Time{}, deleteAt: map[string]time.Time{}}
}

func (s *slowSQS) count() {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
}

func (s *slowSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.count()
	time.Sleep(s.lat)
	out, err := s.SQS.ReceiveMessage(ctx, in, o...)
	if err == nil {
		s.mu.Lock()
		for _, m := range out.Messages {
			s.bodyOf[aws.ToString(m.ReceiptHandle)] = aws.ToString(m.Body)
		}
		s.mu.Unlock()
	}
	return out, err
}

func (s *slowSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.count()
	s.mu.Lock()
	now := time.Now()
	for _, e := range in.Entries {
		body := s.bodyOf[aws.ToString(e.ReceiptHandle)]
		s.deleteAt[body] = now
		if w := now.Sub(s.finished[body]); w > s.maxWait {
			s.maxWait, s.longestOf = w, body
		}
	}
	s.mu.Unlock()
	time.Sleep(s.lat)
	return s.SQS.DeleteMessageBatch(ctx, in, o...)
}

func (s *slowSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.count()
	time.Sleep(s.lat)
	return s.SQS.ChangeMessageVisibilityBatch(ctx, in, o...)
}

// drainAtLatency runs n FIFO messages over groups groups (0: one group per
// message) through a pool with default settings but concurrency conc, SQS
// and the effect at AWS-like latency, and returns the recording SQS.
func drainAtLatency(t *testing.T, n, groups, conc int) *slowSQS {
	t.Helper()
	b := setup(t, options{fifo: true, config: func(c *Config) {
		c.Concurrency = conc
		c.AckDelay = DefaultAckDelay
		c.WaitTime = DefaultWaitTime
	}})
	slow := newSlowSQS(b.sqs, sqsLatency)
	b.rec.SQS = slow
	tr := newTracker(n)
	b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
		end := tr.begin(m)
		time.Sleep(effectLatency)
		slow.mu.Lock()
		slow.finished[m.Body] = time.Now()
		slow.mu.Unlock()
		return end(deleted())
	}
	want := map[string][]string{}
	for i := range n {
		g := "g" + strconv.Itoa(i)
		if groups > 0 {
			g = "g" + strconv.Itoa(i%groups)
		}
		body := "m" + strconv.Itoa(i)
		b.sendFIFO(t, g, body)
		want[g] = append(want[g], body)
	}
	start := time.Now()
	b.start(t)
	<-tr.allDone
	slow.took = time.Since(start)
	b.stop(t)
	tr.snapshot(func(tr *tracker) {
		require.Equal(t, want, tr.order, "every group in order, each message once")
	})
	return slow
}

// TestDeleteBatchesAreFullAtAWSLatency: at AWS-like latency the worker's SQS
// requests per message (receives, delete batches, visibility changes) stay
// within 1.1× the floor of a receive-10/delete-batch drain (0.2) at every
// concurrency. Before the ack delay was counted per entry, entries that came
// while a delete request was under way went out in the next request at
// once: at concurrency 2, batches of 4 and 0.37 requests per message.
func TestDeleteBatchesAreFullAtAWSLatency(t *testing.T) {
	t.Parallel()
	const n, floor = 1000, 0.2
	for _, conc := range []int{2, 16, 64} {
		t.Run(fmt.Sprintf("concurrency-%d", conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := drainAtLatency(t, n, 0, conc)
				perMsg := float64(s.requests) / n
				t.Logf("concurrency %d: %d SQS requests for %d messages: %.3f per message (%.2f× the floor), %.0f msg/s in virtual time",
					conc, s.requests, n, perMsg, perMsg/floor, n/s.took.Seconds())
				require.LessOrEqual(t, perMsg, 1.1*floor)
			})
		})
	}
}

// TestGroupWaitsAtMostTheAckDelay: a finished message's delete is sent
// within the ack delay, so that a FIFO group's next message (which SQS hands
// out only once the previous one is deleted) is not held longer than that,
// at every concurrency, with one group per message or a few busy groups.
// Before, deletes went out one request after another: at concurrency 64
// they fell behind the pool, and a group waited ever longer.
func TestGroupWaitsAtMostTheAckDelay(t *testing.T) {
	t.Parallel()
	const n = 1000
	for _, groups := range []int{0, 4} {
		for _, conc := range []int{2, 16, 64} {
			t.Run(fmt.Sprintf("groups-%d/concurrency-%d", groups, conc), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := drainAtLatency(t, n, groups, conc)
					require.Len(t, s.deleteAt, n)
					t.Logf("groups %d, concurrency %d: longest wait from a message's end to its delete %s (%s); %.0f msg/s in virtual time",
						groups, conc, s.maxWait, s.longestOf, n/s.took.Seconds())
					require.LessOrEqual(t, s.maxWait, DefaultAckDelay)
				})
			})
		}
	}
}

// TestRateAtAWSLatencyGrowsWithConcurrency: with the receivers at their
// default, the pool's rate at AWS-like latency follows its concurrency. A
// receiver brings at most 10 messages per receive round trip (15 ms): two
// of them, the old fixed default, capped a pool near 1,333 msg/s whatever
// its concurrency, so at concurrency 64 it ran at a sixth of what its
// handlers could do (64 / 8 ms), where a hand-written consumer with one
// receive loop per handler did not stop.
func TestRateAtAWSLatencyGrowsWithConcurrency(t *testing.T) {
	t.Parallel()
	const n = 2000
	for _, conc := range []int{2, 16, 64} {
		t.Run(fmt.Sprintf("concurrency-%d", conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := drainAtLatency(t, n, 0, conc)
				rate := n / s.took.Seconds()
				handlers := float64(conc) / effectLatency.Seconds()
				t.Logf("concurrency %d: %.0f msg/s in virtual time, %.2f of what its handlers could do (%.0f msg/s)", conc, rate, rate/handlers, handlers)
				require.GreaterOrEqual(t, rate, 0.5*handlers)
			})
		})
	}
}

// TestRateAtAWSLatencyWithGroupsOfSeveralMessages: a FIFO receive brings
// up to 10 messages of one group, which run one after another in their
// lane; to keep its handlers busy the pool must hold about a receive's
// batch per handler. Capped at 2×concurrency + 10 per receiver (the old
// default of MaxInFlight), a pool at concurrency 16 ran about 5 groups at
// a time and reached a third of what its handlers could do (the bench's
// worker: 0.52× the hand-written consumer, whose 16 loops hold 10 each).
func TestRateAtAWSLatencyWithGroupsOfSeveralMessages(t *testing.T) {
	t.Parallel()
	const n, groups = 3000, 150 // 20 messages a group
	for _, conc := range []int{16, 64} {
		t.Run(fmt.Sprintf("concurrency-%d", conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := drainAtLatency(t, n, groups, conc)
				rate := n / s.took.Seconds()
				handlers := float64(conc) / effectLatency.Seconds()
				perMsg := float64(s.requests) / n
				t.Logf("concurrency %d, %d groups: %.0f msg/s in virtual time, %.2f of what its handlers could do (%.0f msg/s); %.3f SQS requests per message",
					conc, groups, rate, rate/handlers, handlers, perMsg)
				require.GreaterOrEqual(t, rate, 0.55*handlers)
			})
		})
	}
}
