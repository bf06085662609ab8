package pool

import (
	"context"
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

// lateSQS answers every receive and visibility change late, after it took
// effect, and keeps the deadline SQS gave each receipt (from when the call
// reached it).
type lateSQS struct {
	SQS
	late time.Duration

	mu    sync.Mutex
	until map[string]time.Time // receipt handle -> SQS's visibility deadline
}

func (l *lateSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := l.SQS.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		l.mu.Lock()
		for _, m := range out.Messages {
			l.until[aws.ToString(m.ReceiptHandle)] = time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second)
		}
		l.mu.Unlock()
		time.Sleep(l.late)
	}
	return out, err
}

func (l *lateSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out, err := l.SQS.ChangeMessageVisibilityBatch(ctx, in, opts...)
	if err == nil {
		l.mu.Lock()
		for _, s := range out.Successful {
			for _, e := range in.Entries {
				if aws.ToString(e.Id) == aws.ToString(s.Id) {
					l.until[aws.ToString(e.ReceiptHandle)] = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
				}
			}
		}
		l.mu.Unlock()
		time.Sleep(l.late)
	}
	return out, err
}

// TestVisibilityCountedOnIsSQSs: the pool tells OnVisibility each
// visibility deadline it counts on, at the receive and at each confirmed
// extension, and none is later than SQS's for the receipt, even when the
// answers come late: a deadline is dated from the request, which SQS
// counts it from, never from the answer.
func TestVisibilityCountedOnIsSQSs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var l *lateSQS
		type belief struct{ until, sqs time.Time }
		var mu sync.Mutex
		var got []belief
		b := setup(t, options{fifo: true, attrs: map[string]string{"VisibilityTimeout": "8"}, queue: func(q *Queue) {
			q.Visibility = 8 * time.Second
		}, config: func(c *Config) {
			l = &lateSQS{SQS: c.Client, late: 300 * time.Millisecond, until: map[string]time.Time{}}
			c.Client = l
			c.OnVisibility = func(receipt string, until time.Time) {
				l.mu.Lock()
				truth := l.until[receipt]
				l.mu.Unlock()
				mu.Lock()
				got = append(got, belief{until, truth})
				mu.Unlock()
			}
		}})
		tr := newTracker(1)
		b.proc.ProcessFunc = func(_ context.Context, m effect.Message, _ process.Hooks) process.Result {
			end := tr.begin(m)
			time.Sleep(20 * time.Second) // outlasts the visibility timeout: extended
			return end(deleted())
		}
		b.sendFIFO(t, "A", "a1")
		b.start(t)
		<-tr.allDone
		b.stop(t)

		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(got), 3, "the receive and at least two extensions")
		for i, g := range got {
			require.False(t, g.sqs.IsZero(), "belief %d: a deadline SQS never gave", i)
			require.False(t, g.until.After(g.sqs), "belief %d: counted on %s past SQS's deadline", i, g.until.Sub(g.sqs))
		}
	})
}
