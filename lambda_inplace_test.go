package exactly_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// flakyOnce fails each body's first run retryably, then applies it.
type flakyOnce struct {
	mu   sync.Mutex
	runs map[string]int
	ran  []string
}

func (e *flakyOnce) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[in.Message.Body]++
	if e.runs[in.Message.Body] == 1 {
		return effect.Output{}, errors.New("downstream unavailable")
	}
	e.ran = append(e.ran, in.Message.Body)
	return effect.Output{}, nil
}

// TestLambdaRetriesInPlace: the Lambda handler retries a retryable failure
// within the invocation by default (Config.RetryInPlace 2), so a group with
// a transient failure is not handed back; RetryInPlace -1 hands it back, as
// before.
func TestLambdaRetriesInPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		retry   int
		failed  int
		applied []string
	}{
		{"default", 0, 0, []string{"one", "two"}},
		{"none", -1, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := memsqs.New()
				url, _ := memsqs.NewQueue(t, c, true, nil, 15)
				arn := arnOf(t, c, url)
				eff := &flakyOnce{runs: map[string]int{}}
				h := lambdaHandler(t, c, eff, exactly.Config{Queues: []string{url}, LeaveToRedrivePolicy: true, RetryInPlace: tc.retry})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
					record(arn, "m1", "A", "d1", "one"), record(arn, "m22", "A", "d2", "two"),
				}})
				require.NoError(t, err)
				require.Len(t, resp.BatchItemFailures, tc.failed)
				require.Equal(t, tc.applied, eff.ran)
			})
		})
	}
}

// TestLambdaRetryInPlaceBound: RetryInPlace above 20 fails at start, naming
// the setting, on Lambda as on the worker.
func TestLambdaRetryInPlaceBound(t *testing.T) {
	t.Parallel()
	var ce *exactly.ConfigError
	err := exactly.Config{Table: "dedup", Effect: &ranEffect{}, RetryInPlace: 21}.ValidateLambda()
	require.ErrorAs(t, err, &ce)
	require.Contains(t, err.Error(), "RetryInPlace")
}
