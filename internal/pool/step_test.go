package pool

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// TestStepsNameTheRacingGoroutines: Config.Step (exactly.TestConfig.Step)
// is called where goroutines that one event wakes would race: each lane
// before it takes a handler's slot for a message, the keeper before it
// extends, the batcher before it sends. The simulation sleeps there, named
// so, to order them by its seed.
func TestStepsNameTheRacingGoroutines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var steps []string
		b := setup(t, options{config: func(c *Config) {
			c.Concurrency = 1
			c.Step = func(what string) {
				mu.Lock()
				steps = append(steps, what)
				mu.Unlock()
			}
		}})
		b.proc.ProcessFunc = func(ctx context.Context, m effect.Message, h process.Hooks) process.Result {
			time.Sleep(20 * time.Second) // past half the visibility: the keeper extends
			return deleted()
		}
		b.send(t, "a", "b")
		b.start(t)
		time.Sleep(time.Minute)
		b.stop(t)
		q := sqsmsg.QueueName(b.url)
		mu.Lock()
		defer mu.Unlock()
		lanes := 0
		for _, s := range steps {
			if strings.HasPrefix(s, "lane "+q+" ") {
				lanes++
			}
		}
		require.Equal(t, 2, lanes, "a step for each message's lane: %q", steps)
		require.True(t, slices.Contains(steps, "keep "+q), "the keeper's: %q", steps)
		require.True(t, slices.Contains(steps, "flush "+q), "the batcher's: %q", steps)
	})
}
