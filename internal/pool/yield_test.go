package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// yieldRig is a pool on a FIFO queue with the real processor in optimistic
// mode with group commit, on memdynamo behind a slowDB. Its effect takes
// effectTook and records when each message's effect starts; its observer
// records when each message is finished (settled: deleted or handed back).
type yieldRig struct {
	*testBundle
	db *slowDB

	mu         sync.Mutex
	events     []string // "start <body>", "done <body>", in order
	running    int      // effects running now
	maxRunning int
	effectTook time.Duration
}

// slowDB holds every write for hold (virtual time) and fails the first
// fail of them (no verdict); it counts the records written and the
// deletes the pool sends, and checks that deletes never outrun them.
type slowDB struct {
	dedup.API
	hold time.Duration

	mu      sync.Mutex
	fail    int
	commits int
	deletes int
	early   int // deletes sent while fewer commits had succeeded
}

var errThrottled = errors.New("throttled (test)")

// write makes a write of n records (the effect writes nothing else).
func (s *slowDB) write(n int, f func() error) error {
	time.Sleep(s.hold)
	s.mu.Lock()
	if s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		return errThrottled
	}
	s.mu.Unlock()
	err := f()
	if err == nil {
		s.mu.Lock()
		s.commits += n
		s.mu.Unlock()
	}
	return err
}

func (s *slowDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = s.write(1, func() error { out, err = s.API.PutItem(ctx, in, o...); return err })
	return out, err
}

func (s *slowDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (out *dynamodb.TransactWriteItemsOutput, err error) {
	err = s.write(len(in.TransactItems), func() error { out, err = s.API.TransactWriteItems(ctx, in, o...); return err })
	return out, err
}

// deleting is told of every delete the pool sends.
func (s *slowDB) deleting(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes += n
	if s.deletes > s.commits {
		s.early++
	}
}

// yieldSQS tells the slowDB of the pool's deletes.
type yieldSQS struct {
	*recordingSQS
	db *slowDB
}

func (y yieldSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	y.db.deleting(len(in.Entries))
	return y.recordingSQS.DeleteMessageBatch(ctx, in, opts...)
}

func newYieldRig(t *testing.T, concurrency int, hold time.Duration) *yieldRig {
	t.Helper()
	mem := memdynamo.New()
	table := dedupcontract.Table(t, mem)
	r := &yieldRig{db: &slowDB{API: mem, hold: hold}, effectTook: time.Millisecond}
	r.testBundle = setup(t, options{fifo: true, config: func(c *Config) {
		c.Concurrency = concurrency
		c.Client = yieldSQS{recordingSQS: c.Client.(*recordingSQS), db: r.db}
		c.Observer = yieldObserver{r}
	}})
	store := dedup.NewStore(r.db, table)
	r.cfg.Processor = &process.Processor{
		Store: store, Optimistic: true, Log: slog.New(slog.DiscardHandler),
		Group: &process.GroupCommitter{Store: store, Window: 5 * time.Millisecond},
		Scope: func(effect.Message) dedup.Scope { return dedup.Scope{Namespace: "y", Queue: sqsmsg.QueueName(r.url)} },
		Lease: 30 * time.Second, TTL: time.Hour,
		Effect: effect.WritesFunc(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			r.note("start " + in.Message.Body)
			r.mu.Lock()
			r.running++
			r.maxRunning = max(r.maxRunning, r.running)
			r.mu.Unlock()
			time.Sleep(r.effectTook)
			r.mu.Lock()
			r.running--
			r.mu.Unlock()
			return effect.Output{}, nil
		}),
	}
	return r
}

func (r *yieldRig) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// at is the index of event e in r.events, or -1.
func (r *yieldRig) at(e string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.events {
		if x == e {
			return i
		}
	}
	return -1
}

func (r *yieldRig) eventList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

type yieldObserver struct{ r *yieldRig }

func (yieldObserver) Received(string, int)            {}
func (yieldObserver) ReceiveError(string, error)      {}
func (yieldObserver) BatchFailed(string, string, int) {}
func (yieldObserver) InFlight(int)                    {}
func (o yieldObserver) Done(_ string, r process.Result, _ time.Duration) {
	o.r.note(fmt.Sprintf("done %s %s", r.Key[strings.LastIndex(r.Key, "#")+1:], r.Action))
}

// doneIndex is the index of the done event of the message with this body
// (its dedup key: sendFIFO makes it the MessageDeduplicationId), or -1.
func (r *yieldRig) doneIndex(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.events {
		if strings.HasPrefix(x, "done "+body+" ") {
			return i
		}
	}
	return -1
}

// TestGroupCommitGivesTheSlotBack: with group commit, a message whose commit
// waits in the shared transaction holds no slot: at concurrency 1, another
// group's message runs its effect meanwhile, and effects never run more
// than the concurrency at once.
func TestGroupCommitGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newYieldRig(t, 1, 50*time.Millisecond)
		r.sendFIFO(t, "a", "a1")
		r.sendFIFO(t, "b", "b1")
		r.start(t)
		time.Sleep(time.Second)
		r.stop(t)
		ev := r.eventList()
		first, second := "a1", "b1"
		if r.at("start b1") < r.at("start a1") {
			first, second = second, first
		}
		require.GreaterOrEqual(t, r.at("start "+first), 0, "events: %v", ev)
		require.Less(t, r.at("start "+second), r.doneIndex(first), "the second effect waited for the first commit's answer: %v", ev)
		require.Equal(t, 1, r.maxRunning, "effects at once")
		require.Equal(t, 2, r.db.commits, "both committed")
		require.Zero(t, r.db.early, "a delete before its commit")
		v, inflight := r.counts(t, r.url)
		require.Zero(t, v+inflight, "both deleted")
	})
}

// TestGroupCommitKeepsTheGroupsOrder: a group's next message starts only
// after its previous one's commit has its answer, although the lane gave
// its slot back meanwhile, at every concurrency.
func TestGroupCommitKeepsTheGroupsOrder(t *testing.T) {
	t.Parallel()
	for _, conc := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(conc), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newYieldRig(t, conc, 20*time.Millisecond)
				const groups, each = 3, 4
				for g := range groups {
					var bodies []string
					for i := range each {
						bodies = append(bodies, fmt.Sprintf("g%d-%d", g, i))
					}
					r.sendFIFO(t, fmt.Sprint("g", g), bodies...)
				}
				r.start(t)
				time.Sleep(5 * time.Second)
				r.stop(t)
				ev := r.eventList()
				for g := range groups {
					for i := 1; i < each; i++ {
						prev, next := fmt.Sprintf("g%d-%d", g, i-1), fmt.Sprintf("g%d-%d", g, i)
						d, s := r.doneIndex(prev), r.at("start "+next)
						require.GreaterOrEqual(t, d, 0, "%s never finished: %v", prev, ev)
						require.Less(t, d, s, "%s started before %s's commit had its answer: %v", next, prev, ev)
					}
				}
				require.LessOrEqual(t, r.maxRunning, conc, "effects at once")
				require.Equal(t, groups*each, r.db.commits)
				require.Zero(t, r.db.early, "a delete before its commit")
			})
		})
	}
}

// TestGroupCommitFailsAfterTheSlotWentBack: commits that fail without a
// verdict after their slot was given back are retried (by the processor,
// or, once it gives up, by the lane in place, its effect run again on a
// slot taken again) and applied once; no message is deleted before its
// commit, the other group's effect ran meanwhile, and each group kept its
// order.
func TestGroupCommitFailsAfterTheSlotWentBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		fail          int
		commitTimeout time.Duration
	}{
		{"retried by the processor", 3, 0},
		{"given up and retried in place", 2, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newYieldRig(t, 1, 20*time.Millisecond)
				r.db.fail = tc.fail
				r.cfg.RetryInPlace = 1
				r.cfg.Processor.(*process.Processor).CommitTimeout = tc.commitTimeout
				r.sendFIFO(t, "a", "a1", "a2")
				r.sendFIFO(t, "b", "b1", "b2")
				r.start(t)
				time.Sleep(30 * time.Second)
				r.stop(t)
				ev := r.eventList()
				all := strings.Join(ev, ",")
				for _, m := range []string{"a1", "a2", "b1", "b2"} {
					require.GreaterOrEqual(t, r.doneIndex(m), 0, "%s: %v", m, ev)
					require.Equal(t, 1, strings.Count(all, "done "+m+" delete"), "%s: %v", m, ev)
				}
				if tc.commitTimeout > 0 {
					require.Equal(t, 2, strings.Count(all, " retry"), "the first commits gave up: %v", ev)
				}
				first, second := "a1", "b1"
				if r.at("start b1") < r.at("start a1") {
					first, second = second, first
				}
				require.Less(t, r.at("start "+second), r.doneIndex(first), "the other group waited: %v", ev)
				require.Less(t, strings.LastIndex(all, "done a1 "), strings.Index(all, "start a2"), "order: %v", ev)
				require.Less(t, strings.LastIndex(all, "done b1 "), strings.Index(all, "start b2"), "order: %v", ev)
				require.Equal(t, 4, r.db.commits, "each applied once")
				require.Zero(t, r.db.early, "a delete before its commit")
				require.Equal(t, 1, r.maxRunning)
				v, inflight := r.counts(t, r.url)
				require.Zero(t, v+inflight, "all deleted")
			})
		})
	}
}

// TestGroupCommitStopWhileCommitting: a stop while commits wait for their
// answer (their slots given back) leaves nothing stranded: Run returns,
// every message is deleted after its commit or left in the queue, and no
// effect starts after the stop.
func TestGroupCommitStopWhileCommitting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newYieldRig(t, 2, 200*time.Millisecond)
		const groups = 6
		for g := range groups {
			r.sendFIFO(t, fmt.Sprint("g", g), fmt.Sprintf("g%d-0", g), fmt.Sprintf("g%d-1", g))
		}
		r.start(t)
		time.Sleep(1100 * time.Millisecond) // receives done, commits waiting
		r.mu.Lock()
		startsAtStop := 0
		for _, e := range r.events {
			if strings.HasPrefix(e, "start ") {
				startsAtStop++
			}
		}
		r.mu.Unlock()
		r.stop(t)
		ev := r.eventList()
		starts := 0
		for _, e := range ev {
			if strings.HasPrefix(e, "start ") {
				starts++
			}
		}
		require.Positive(t, startsAtStop, "%v", ev)
		require.Equal(t, startsAtStop, starts, "an effect started after the stop: %v", ev)
		require.Zero(t, r.db.early, "a delete before its commit")
		time.Sleep(time.Minute) // the visibility of anything left passes
		v, inflight := r.counts(t, r.url)
		require.Zero(t, inflight)
		require.Equal(t, 2*groups, v+r.db.commits, "each message committed (and deleted) or in the queue: %v", ev)
	})
}
