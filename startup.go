package exactly

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/exactlyonce/exactly/internal/jitter"
)

// startupPatience bounds how long start-up retries calls that fail
// transiently (5xx, throttling, a reset connection) after the SDK's own
// retries: a service having a bad minute is not a configuration error, and
// a worker that exits on it only to be restarted by its orchestrator gains
// nothing.
const startupPatience = time.Minute

// transient reports whether a start-up call's error says nothing about the
// configuration: the SDK would retry it, and its attempts ran out.
func transient(err error) bool {
	var ce *ConfigError
	if err == nil || errors.As(err, &ce) || errors.Is(err, context.Canceled) {
		return false
	}
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

// startup runs a start-up step, again while it fails transiently, for up to
// startupPatience or until ctx ends.
func startup[T any](ctx context.Context, log *slog.Logger, r *jitter.Rand, step string, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(startupPatience)
	wait := 500 * time.Millisecond
	for {
		v, err := f()
		if !transient(err) || time.Now().Add(wait).After(deadline) {
			return v, err
		}
		log.Warn("start-up call failed; trying again", "step", step, "in_ms", wait.Milliseconds(), "err", err)
		t := time.NewTimer(r.Between(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, 8*time.Second)
	}
}
