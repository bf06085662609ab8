package pool

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// downSQS fails every ReceiveMessage while down is set.
type downSQS struct {
	SQS
	down  atomic.Bool
	calls atomic.Int64
}

func (f *downSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if f.down.Load() {
		f.calls.Add(1)
		return nil, errors.New("connection refused")
	}
	return f.SQS.ReceiveMessage(ctx, in, opts...)
}

type receiveErrObserver struct {
	testObserver
	receiveErrors atomic.Int64
}

func (o *receiveErrObserver) ReceiveError(string, error) { o.receiveErrors.Add(1) }

// TestReceiveErrorsBackOffAndLogSparingly: while SQS fails, receivers back
// off exponentially (no spinning), every failure is counted, the warning is
// logged at most once per receiver per 10 s, and work resumes once SQS is back.
func TestReceiveErrorsBackOffAndLogSparingly(t *testing.T) {
	t.Parallel()
	obs := &receiveErrObserver{}
	var client *downSQS
	b := setup(t, options{config: func(c *Config) {
		client = &downSQS{SQS: c.Client}
		client.down.Store(true)
		c.Client = client
		c.Observer = obs
	}})
	b.send(t, "a", "b", "c")
	var ran atomic.Int32
	b.proc.ProcessFunc = func(context.Context, effect.Message, process.Hooks) process.Result {
		ran.Add(1)
		return deleted()
	}
	b.start(t)
	time.Sleep(1500 * time.Millisecond)
	calls := client.calls.Load()
	// Two receivers backing off from 100 ms (doubling, jittered in [d/2, d])
	// make at most ~5 calls each in 1.5 s; a loop without backoff makes
	// thousands.
	require.LessOrEqual(t, calls, int64(12), "receivers back off")
	require.GreaterOrEqual(t, calls, int64(2), "each receiver keeps trying")
	require.Equal(t, calls, obs.receiveErrors.Load(), "every failure is counted")
	require.LessOrEqual(t, strings.Count(b.logs.String(), `msg="cannot receive"`), 2, "one warning per receiver per 10 s")
	require.Zero(t, ran.Load())

	client.down.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for ran.Load() < 3 {
		require.True(t, time.Now().Before(deadline), "work resumes once SQS answers")
		time.Sleep(10 * time.Millisecond)
	}
}
