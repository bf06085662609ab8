package pool

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// TestAStopWinsTheSlotItFrees: a handler that ends Run's context as it
// returns (the simulation's crash, inside one of its calls) frees its slot
// just as shutdown begins, before Run closes stopCh. The lane waiting for
// that slot must not start its message, whichever of Run and the lane runs
// first: here Run is slow to get there (its log line takes a second), and
// the message is handed back unstarted.
func TestAStopWinsTheSlotItFrees(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		b := setup(t, options{config: func(c *Config) {
			c.Concurrency = 1
			c.Log = slog.New(slowStopLine{c.Log.Handler()})
		}})
		b.proc.ProcessFunc = func(ctx context.Context, m effect.Message, h process.Hooks) process.Result {
			if ran.Add(1) == 1 {
				time.Sleep(5 * time.Second) // the other message is received meanwhile
				b.cancel()
			}
			return deleted()
		}
		b.send(t, "a", "b")
		b.start(t)
		time.Sleep(time.Minute)
		b.stop(t)
		require.Equal(t, int32(1), ran.Load(), "a message started after its process began to stop")
		require.Contains(t, b.logs.String(), "shutdown complete")
	})
}

// slowStopLine is a log handler that takes a second to write the line that
// begins shutdown.
type slowStopLine struct{ slog.Handler }

func (h slowStopLine) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "shutting down") {
		time.Sleep(time.Second)
	}
	return h.Handler.Handle(ctx, r)
}

func (h slowStopLine) WithAttrs(as []slog.Attr) slog.Handler {
	return slowStopLine{h.Handler.WithAttrs(as)}
}

func (h slowStopLine) WithGroup(name string) slog.Handler {
	return slowStopLine{h.Handler.WithGroup(name)}
}
