package sqsevent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
)

// failing makes the recorder's effect fail retryably (after asks for a
// RetryAfter when positive) the first n times it runs message id, and
// records when each of id's runs began.
func failing(b *bundle, id string, n int, after time.Duration) (runs func() []time.Time) {
	var mu sync.Mutex
	var at []time.Time
	b.eff.apply = func(_ context.Context, in effect.Input) error {
		if in.Message.ID != id {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) > n {
			return nil
		}
		err := errors.New("downstream unavailable")
		if after > 0 {
			return effect.RetryAfter(after, err)
		}
		return err
	}
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

// TestRetryInPlaceWithinTheInvocation: a retryable failure is tried again
// within the invocation after a backoff (about 1 s, then 2 s), and the rest
// of its FIFO group runs after it: nothing is reported, nothing of the
// group goes back to the queue (virtual time: exact waits).
func TestRetryInPlaceWithinTheInvocation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, b := setup(t, func(c *Config) { c.RetryInPlace = 2 })
		runs := failing(b, "a1", 2, 0)
		require.Empty(t, invoke(t, h, time.Minute,
			msg(fifoARN, "a1", "A", "a1", 1), msg(fifoARN, "a2", "A", "a2", 2), msg(fifoARN, "b1", "B", "b1", 3)))
		at := runs()
		require.Len(t, at, 3, "two retries in place, the second succeeds")
		first, second := at[1].Sub(at[0]), at[2].Sub(at[1])
		require.True(t, first >= 500*time.Millisecond && first <= time.Second, "first wait %s: about RetryBase", first)
		require.True(t, second >= time.Second && second <= 2*time.Second, "second wait %s: twice that", second)
		ran := b.eff.ids()
		require.Equal(t, []string{"a1", "a1", "a1", "a2"}, only(ran, "a1", "a2"), "a2 after a1 succeeded")
		require.Len(t, b.logs.lines("retry in place"), 2)
		done := b.logs.lines("batch done")[0]
		require.EqualValues(t, 2, done["retried_in_place"])
		require.EqualValues(t, 0, done["batch_item_failures"])
	})
}

// TestRetryInPlaceGivesUp: once its retries are spent, a message is reported
// with the rest of its group, as without retries in place.
func TestRetryInPlaceGivesUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, b := setup(t, func(c *Config) { c.RetryInPlace = 2 })
		runs := failing(b, "a1", 100, 0)
		require.Equal(t, []string{"a1", "a2"}, invoke(t, h, time.Minute,
			msg(fifoARN, "a1", "A", "a1", 1), msg(fifoARN, "a2", "A", "a2", 2)))
		require.Len(t, runs(), 3)
		require.NotContains(t, b.eff.ids(), "a2")
		require.Len(t, b.logs.lines("retry: reported as a batch item failure"), 1)
	})
}

// TestRetryInPlaceOnlyWhileTimeIsLeft: a retry goes only when the wait and
// MinLease fit before the margin; an effect's RetryAfter is that wait.
func TestRetryInPlaceOnlyWhileTimeIsLeft(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout time.Duration // margin 2 s, MinLease 1 s, RetryAfter 5 s
		runs    int
	}{
		{"8s left: 5s+1s fit before the margin", 8*time.Second + time.Millisecond, 2},
		{"7.9s left: they do not", 7900 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h, b := setup(t, func(c *Config) { c.RetryInPlace = 3 })
				runs := failing(b, "a1", 1, 5*time.Second)
				failed := invoke(t, h, tc.timeout, msg(fifoARN, "a1", "A", "a1", 1))
				require.Len(t, runs(), tc.runs)
				if tc.runs == 1 {
					require.Equal(t, []string{"a1"}, failed)
					require.Empty(t, b.logs.lines("retry in place"))
					return
				}
				require.Empty(t, failed)
				require.Equal(t, 5*time.Second, runs()[1].Sub(runs()[0]), "the effect's RetryAfter")
			})
		})
	}
	t.Run("a RetryAfter past RetryMax is reported at once", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			h, b := setup(t, func(c *Config) { c.RetryInPlace = 3; c.RetryMax = 4 * time.Second })
			runs := failing(b, "a1", 1, 5*time.Second)
			require.Equal(t, []string{"a1"}, invoke(t, h, time.Hour, msg(fifoARN, "a1", "A", "a1", 1)))
			require.Len(t, runs(), 1)
		})
	})
}

// TestBusyIsNotRetriedInPlace: a key another consumer holds is reported at
// once: waiting would only hold its group while the holder finishes.
func TestBusyIsNotRetriedInPlace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, b := setup(t, func(c *Config) { c.RetryInPlace = 3 })
		scope := dedup.Scope{Namespace: "test", Queue: "orders.fifo"}
		_, err := b.store.Claim(context.Background(), dedup.ClaimRequest{
			Key: scope.Key("A", "held"), PayloadSHA256: dedup.PayloadHash("x"), Lease: time.Hour, TTL: time.Hour,
		})
		require.NoError(t, err)
		start := time.Now()
		require.Equal(t, []string{"a1"}, invoke(t, h, time.Minute, withKey(msg(fifoARN, "a1", "A", "x", 1), "held")))
		require.Zero(t, time.Since(start), "no wait")
		require.Empty(t, b.logs.lines("retry in place"))
	})
}

// TestRetryInPlaceEndsWithTheInvocation: an invocation whose context ends
// during the wait reports the message; nothing runs after.
func TestRetryInPlaceEndsWithTheInvocation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h, b := setup(t, func(c *Config) { c.RetryInPlace = 3 })
		runs := failing(b, "a1", 1, 3*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg(fifoARN, "a1", "A", "a1", 1), msg(fifoARN, "a2", "A", "a2", 2)}})
		require.NoError(t, err)
		require.Equal(t, []string{"a1", "a2"}, failures(resp))
		require.Len(t, runs(), 1)
	})
}

// TestRetryInPlaceWaitsWithoutItsSlot: with one slot, a message of another
// lane runs while a retry in place waits, not after it: a1 fails at once
// and waits 3 s; b1 (2 s of work, its lane let in once a1 has run) ends
// within that wait, and the batch takes 3 s, not 5.
func TestRetryInPlaceWaitsWithoutItsSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var runs func() []time.Time
		h, b := setup(t, func(c *Config) {
			c.RetryInPlace, c.Concurrency = 1, 1
			c.Step = func(what string) {
				for what == "lane b1" && len(runs()) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
		runs = failing(b, "a1", 1, 3*time.Second)
		fail := b.eff.apply
		b.eff.apply = func(ctx context.Context, in effect.Input) error {
			if in.Message.ID == "b1" {
				time.Sleep(2 * time.Second)
			}
			return fail(ctx, in)
		}
		start := time.Now()
		require.Empty(t, invoke(t, h, time.Minute, msg(standardARN, "a1", "", "a1", 0), msg(standardARN, "b1", "", "b1", 0)))
		require.Len(t, runs(), 2)
		require.Equal(t, []string{"a1", "b1", "a1"}, b.eff.ids(), "b1 ran during a1's wait")
		require.Equal(t, 3*time.Second, time.Since(start), "the batch took a1's wait, no more")
	})
}
