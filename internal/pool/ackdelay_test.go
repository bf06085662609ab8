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
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
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
	runOf     map[string]string    // body -> its group's run: the receive that brought it, and its group
	requests  int                  // ReceiveMessage, DeleteMessageBatch, ChangeMessageVisibilityBatch
	deletes   int                  // DeleteMessageBatch requests
	receives  int                  // ReceiveMessage answers
	took      time.Duration        // from the start to the last message's end
	maxWait   time.Duration        // longest finish -> delete request
	longestOf string
}

func newSlowSQS(inner SQS, lat time.Duration) *slowSQS {
	return &slowSQS{SQS: inner, lat: lat, bodyOf: map[string]string{}, finished: map[string]time.Time{}, deleteAt: map[string]time.Time{}, runOf: map[string]string{}}
}

// groupWait is the longest a FIFO group waited for its next message
// because of the worker's deletes: SQS hands out a group's next messages
// only once every message of it in flight is deleted, so a run of a group
// (its messages one receive brought) waits from the end of its last
// message to the last of its deletes.
func (s *slowSQS) groupWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	lastEnd, lastDelete := map[string]time.Time{}, map[string]time.Time{}
	for body, run := range s.runOf {
		if e := s.finished[body]; e.After(lastEnd[run]) {
			lastEnd[run] = e
		}
		if d := s.deleteAt[body]; d.After(lastDelete[run]) {
			lastDelete[run] = d
		}
	}
	var longest time.Duration
	for run, d := range lastDelete {
		longest = max(longest, d.Sub(lastEnd[run]))
	}
	return longest
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
		s.receives++
		for _, m := range out.Messages {
			s.bodyOf[aws.ToString(m.ReceiptHandle)] = aws.ToString(m.Body)
			s.runOf[aws.ToString(m.Body)] = fmt.Sprintf("%d/%s", s.receives, m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)])
		}
		s.mu.Unlock()
	}
	return out, err
}

func (s *slowSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.count()
	s.mu.Lock()
	s.deletes++
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
	return drainAt(t, n, groups, conc, effectLatency)
}

// drainAt is drainAtLatency with each message's effect taking took.
func drainAt(t *testing.T, n, groups, conc int, took time.Duration) *slowSQS {
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
		time.Sleep(took)
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

// TestDeleteBatchesAreFullWithGroupsOfSeveralMessages: as above, with
// groups of 10 messages (a FIFO receive brings 10 of one group, which run one
// after another), as in the bench's queue, and a message taking 15ms (the
// bench's ledger commit, one transaction) as well as 8ms. A delete of a group that still
// has messages in flight waits for them: the group's next messages cannot
// come before they are all deleted anyway, so it costs the group nothing,
// and the group's run goes in one request. Before, each delete waited at
// most the ack delay, so at concurrency 2 (a group's run of 10 takes longer
// than the ack delay) batches went out with 5 to 8: 1.15 to 1.37 × the
// floor in the bench.
func TestDeleteBatchesAreFullWithGroupsOfSeveralMessages(t *testing.T) {
	t.Parallel()
	const n, groups, floor = 1000, 100, 0.2
	for _, took := range []time.Duration{effectLatency, 15 * time.Millisecond} {
		for _, conc := range []int{2, 16, 64} {
			t.Run(fmt.Sprintf("effect-%s/concurrency-%d", took, conc), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := drainAt(t, n, groups, conc, took)
					perMsg := float64(s.requests) / n
					t.Logf("concurrency %d, %d groups, effect %s: %d SQS requests (%d delete batches) for %d messages: %.3f per message (%.2f× the floor); group wait %s; %.0f msg/s in virtual time",
						conc, groups, took, s.requests, s.deletes, n, perMsg, perMsg/floor, s.groupWait(), n/s.took.Seconds())
					require.LessOrEqual(t, perMsg, 1.1*floor)
					require.LessOrEqual(t, s.groupWait(), DefaultAckDelay)
				})
			})
		}
	}
}

// TestGroupWaitsAtMostTheAckDelay: a FIFO group's next message (which SQS
// hands out only once every message of the group in flight is deleted) is
// held back by the worker's deletes no longer than the ack delay after the
// group's last message in flight ended, at every concurrency, with one group
// per message, a few busy groups, or groups of 10 messages a receive.
// Before, deletes went out one request after another: at concurrency 64
// they fell behind the pool, and a group waited ever longer.
func TestGroupWaitsAtMostTheAckDelay(t *testing.T) {
	t.Parallel()
	const n = 1000
	for _, groups := range []int{0, 4, 100} {
		for _, conc := range []int{2, 16, 64} {
			t.Run(fmt.Sprintf("groups-%d/concurrency-%d", groups, conc), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := drainAtLatency(t, n, groups, conc)
					require.Len(t, s.deleteAt, n)
					t.Logf("groups %d, concurrency %d: longest wait of a group from its last message's end to its deletes %s; from a message's end to its delete %s (%s); %.0f msg/s in virtual time",
						groups, conc, s.groupWait(), s.maxWait, s.longestOf, n/s.took.Seconds())
					require.LessOrEqual(t, s.groupWait(), DefaultAckDelay)
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
