package exactly

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
)

// TestGroupCommitDefaultsToMoreReceivers: with GroupCommit a handler gives
// its slot back while its commit waits and finishes about twice the
// messages, so the default receivers are one per 4 handlers, not one per 8;
// a Receivers set by hand stays.
func TestGroupCommitDefaultsToMoreReceivers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		conc, receivers int
		group           time.Duration
		want            int
	}{
		{0, 0, 0, 4},
		{0, 0, 5 * time.Millisecond, 8},
		{64, 0, 0, 8},
		{64, 0, 5 * time.Millisecond, 16},
		{4, 0, 5 * time.Millisecond, 2},
		{64, 3, 5 * time.Millisecond, 3},
	} {
		cfg := Config{Table: "t", Queues: []string{"https://sqs.us-east-1.amazonaws.com/1/q"}, Effect: effect.WritesFunc(func(context.Context, effect.Input) (effect.Output, error) { return effect.Output{}, nil }),
			Concurrency: tc.conc, Receivers: tc.receivers, GroupCommit: tc.group}
		s, err := cfg.settings(false)
		require.NoError(t, err)
		require.Equal(t, tc.want, s.Receivers, "concurrency %d, receivers %d, group commit %s", tc.conc, tc.receivers, tc.group)
	}
}
