package pool

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// batchSQS records batch requests; the first DeleteMessageBatch can be held.
type batchSQS struct {
	SQS
	hold    chan struct{} // when set, the first delete waits for it
	holding chan struct{} // closed when the first delete is held

	mu      sync.Mutex
	calls   int
	deletes []string
	changes map[string]int32
	order   []string // "delete:<r>" and "change:<r>" in request order
}

func (s *batchSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	for _, e := range in.Entries {
		s.deletes = append(s.deletes, aws.ToString(e.ReceiptHandle))
		s.order = append(s.order, "delete:"+aws.ToString(e.ReceiptHandle))
	}
	s.mu.Unlock()
	if first && s.hold != nil {
		close(s.holding)
		<-s.hold
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (s *batchSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range in.Entries {
		s.changes[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		s.order = append(s.order, "change:"+aws.ToString(e.ReceiptHandle))
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

// runHourBatcher runs a batcher with an hour's delay on a recording SQS
// until the test ends.
func runHourBatcher(t *testing.T) (*batchSQS, *batcher) {
	c := &batchSQS{changes: map[string]int32{}}
	b := newBatcher(c, "q", time.Hour, func(string, int, error) {})
	go b.run()
	t.Cleanup(b.close)
	return c, b
}

func (s *batchSQS) deleted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deletes)
}

// Before the fix, a flush that found more than a batch sent one batch and
// left the remainder (fewer than 10) pending until the next add: at the
// tail of a load those deletes waited for shutdown.
func TestBatcherFlushesWhatArrivedDuringAFlush(t *testing.T) {
	t.Parallel()
	c := &batchSQS{hold: make(chan struct{}), holding: make(chan struct{}), changes: map[string]int32{}}
	b := newBatcher(c, "q", time.Millisecond, func(string, int, error) { t.Error("no failures expected") })
	go b.run()
	defer b.close()

	b.delete("r0")
	waitFor(t, c.holding, 5*time.Second, "the first flush")
	for i := 1; i <= 12; i++ {
		b.delete("r" + strconv.Itoa(i))
	}
	close(c.hold)
	eventually(t, 5*time.Second, func() bool { return c.deleted() == 13 }, "all 13 deletes without a further add")
}

func TestBatcherSendsFullBatchesAtOnce(t *testing.T) {
	t.Parallel()
	c, b := runHourBatcher(t)
	b.delete("r0")
	time.Sleep(50 * time.Millisecond) // the batcher now waits out the delay for r0
	for i := 1; i < 10; i++ {
		b.delete("r" + strconv.Itoa(i))
	}
	eventually(t, 5*time.Second, func() bool { return c.deleted() == 10 }, "a full batch, long before the delay")
}

func TestBatcherCoalescesByReceipt(t *testing.T) {
	t.Parallel()
	c := &batchSQS{changes: map[string]int32{}}
	b := newBatcher(c, "q", time.Hour, func(string, int, error) {})
	go b.run()
	b.changeVisibility("a", 30*time.Second) // a heartbeat's extension...
	b.changeVisibility("a", 0)              // ...then the hand-back: the last word wins
	b.changeVisibility("b", 30*time.Second)
	b.delete("b") // a delete makes a pending change moot
	b.close()     // flushes

	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, map[string]int32{"a": 0}, c.changes)
	require.Equal(t, []string{"b"}, c.deletes)
	// Deletes go out concurrently with changes: no order between receipts.
	require.ElementsMatch(t, []string{"delete:b", "change:a"}, c.order)
}

func TestBatcherReportsPerEntryFailures(t *testing.T) {
	t.Parallel()
	c := &failingSQS{}
	var mu sync.Mutex
	var got []string
	b := newBatcher(c, "q", time.Hour, func(op string, n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, op+":"+strconv.Itoa(n)+":"+err.Error())
	})
	go b.run()
	b.delete("x")
	b.delete("y")
	b.close()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"delete:1:ReceiptHandleIsInvalid: nope"}, got)
}

type failingSQS struct{ SQS }

func (failingSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{
		Successful: []types.DeleteMessageBatchResultEntry{{Id: in.Entries[0].Id}},
		Failed:     []types.BatchResultErrorEntry{{Id: in.Entries[1].Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("nope"), SenderFault: true}},
	}, nil
}

func TestVisibilitySeconds(t *testing.T) {
	t.Parallel()
	require.Equal(t, int32(0), visibilitySeconds(0))
	require.Equal(t, int32(1), visibilitySeconds(time.Nanosecond), "no sooner than asked")
	require.Equal(t, int32(2), visibilitySeconds(1500*time.Millisecond))
	require.Equal(t, int32(43200), visibilitySeconds(13*time.Hour), "SQS's ceiling")
}

func TestDefaultLeaseEndsBeforeTheVisibility(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ vis, lease time.Duration }{
		{2 * time.Second, time.Second},
		{3 * time.Second, 2 * time.Second},
		{30 * time.Second, 27 * time.Second},
		{5 * time.Minute, 270 * time.Second},
	} {
		require.Equal(t, c.lease, DefaultLease(c.vis), c.vis)
	}
}

// TestBatcherFlushesAtOnceWhenIdle: the pool says nothing more is coming;
// the pending entries go without waiting out the delay, and the signal is
// spent: a later lone entry waits again.
func TestBatcherFlushesAtOnceWhenIdle(t *testing.T) {
	t.Parallel()
	c, b := runHourBatcher(t)
	b.delete("r0")
	b.delete("r1")
	b.idle()
	eventually(t, 5*time.Second, func() bool { return c.deleted() == 2 }, "both deletes, long before the delay")

	b.idle() // stale: nothing is pending
	time.Sleep(50 * time.Millisecond)
	b.delete("r2")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 2, c.deleted(), "a lone entry after a spent signal waits for company")
}

// changeFailSQS fails the ChangeMessageVisibilityBatch entries whose
// receipt is in fail, with that code.
type changeFailSQS struct {
	SQS
	fail map[string]string
}

func (c changeFailSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if code, ok := c.fail[aws.ToString(e.ReceiptHandle)]; ok {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("nope"), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// TestBatcherTellsEachExtensionItsOutcome: an extension learns its own
// entry's answer, and failed extensions are reported apart from failed
// hand-backs (so that a failure is counted once, where it belongs).
func TestBatcherTellsEachExtensionItsOutcome(t *testing.T) {
	t.Parallel()
	c := changeFailSQS{fail: map[string]string{"e2": "InternalError", "e3": "ReceiptHandleIsInvalid", "e4": "MessageNotInflight", "h2": "MessageNotInflight"}}
	var mu sync.Mutex
	var reports []string
	outcome := map[string]error{}
	b := newBatcher(c, "q", time.Hour, func(op string, n int, _ error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, op+":"+strconv.Itoa(n))
	})
	go b.run()
	for _, r := range []string{"e1", "e2", "e3", "e4"} {
		b.extend(r, 30*time.Second, func(err error) bool {
			mu.Lock()
			defer mu.Unlock()
			outcome[r] = err
			return r != "e4" // e4 was settled meanwhile: its failure does not count
		})
	}
	b.changeVisibility("h1", 0)
	b.changeVisibility("h2", 0)
	b.close()

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, outcome, 4)
	require.NoError(t, outcome["e1"])
	require.EqualError(t, outcome["e2"], "InternalError: nope")
	require.False(t, staleReceipt(outcome["e2"]))
	require.True(t, staleReceipt(outcome["e3"]))
	require.ElementsMatch(t, []string{"change_visibility:1", "extend:2"}, reports)
}

func TestStaleReceiptCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code, msg string
		stale     bool
	}{
		{"ReceiptHandleIsInvalid", "", true},
		{"MessageNotInflight", "", true},
		{"AWS.SimpleQueueService.MessageNotInflight", "", true},
		{"InvalidParameterValue", "Value x for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", true},
		{"InvalidParameterValue", "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", false},
		{"InternalError", "", false},
		{"ServiceUnavailable", "", false},
	} {
		require.Equal(t, c.stale, staleReceipt(batchError{code: c.code, msg: c.msg}), c.code+" "+c.msg)
	}
	require.False(t, staleReceipt(errors.New("ReceiptHandleIsInvalid")), "only an entry's answer says so")
}

// TestBatcherParksAGroupsDeletes: deletes of a FIFO group that still has
// messages in flight wait for the group's last one, then go together within
// the delay, in one request. A delete of another group queued while only
// parked ones wait goes after the delay, not at their (later) due; a batch
// that goes takes parked deletes along to fill it (deleting early costs
// nothing).
func TestBatcherParksAGroupsDeletes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const delay = 50 * time.Millisecond
		c := &batchSQS{changes: map[string]int32{}}
		b := newBatcher(c, "q", delay, func(string, int, error) { t.Error("no failures expected") })
		go b.run()
		defer b.close()
		for i := range 3 {
			b.deleteParked("g-"+strconv.Itoa(i), "g", time.Now().Add(time.Hour))
		}
		time.Sleep(time.Second) // g's run goes on, its deletes parked
		synctest.Wait()
		require.Equal(t, 0, c.deleted(), "parked: not due by age")
		b.unpark("g") // g's last message is settled
		b.delete("g-3")
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		require.Equal(t, 0, c.deleted(), "due at the delay after g's last")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		c.mu.Lock()
		require.Equal(t, []string{"g-0", "g-1", "g-2", "g-3"}, c.deletes)
		require.Equal(t, 1, c.calls, "g's run in one request")
		c.mu.Unlock()

		b.deleteParked("k-0", "k", time.Now().Add(time.Hour))
		time.Sleep(time.Millisecond)
		b.delete("h-0") // another group's last: due after the delay
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		require.Equal(t, 4, c.deleted())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		require.Equal(t, []string{"g-0", "g-1", "g-2", "g-3", "h-0", "k-0"}, c.deletes, "h-0 at the delay, k-0 along")
	})
}

// TestBatcherParkedDeletesHaveALatest: a parked delete goes by its latest
// even if its group is never unparked (its visibility must not lapse).
func TestBatcherParkedDeletesHaveALatest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &batchSQS{changes: map[string]int32{}}
		b := newBatcher(c, "q", 50*time.Millisecond, func(string, int, error) {})
		go b.run()
		defer b.close()
		b.deleteParked("g-0", "g", time.Now().Add(10*time.Second))
		time.Sleep(10*time.Second - time.Millisecond)
		synctest.Wait()
		require.Equal(t, 0, c.deleted())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, c.deleted())
	})
}
