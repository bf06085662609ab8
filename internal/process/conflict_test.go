package process_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
)

// TestConflictIsNotedOnTheRecord: a delivery of another payload under a
// completed key leaves its payload hash, message id and time on the
// record, in claim mode and in optimistic mode, with one UpdateItem and
// nothing else of the record changed; the verdict is the conflict's.
func TestConflictIsNotedOnTheRecord(t *testing.T) {
	t.Parallel()
	for _, optimistic := range []bool{false, true} {
		b := setup(t)
		f := withFaults(t, b)
		b.proc.Optimistic = optimistic
		first := b.proc.Process(context.Background(), msg("1", "a"), process.Hooks{})
		require.Equal(t, process.Delete, first.Action)
		before, err := dedup.DecodeRecord(b.record(t, first.Key))
		require.NoError(t, err)
		require.Zero(t, before.Conflicts)

		updates := f.count("lease")
		m := msg("1", "b")
		m.ID = "m-other"
		r := b.proc.Process(context.Background(), m, process.Hooks{})
		require.Equal(t, process.Fail, r.Action)
		require.Equal(t, dedup.Conflict, r.Outcome)
		require.Equal(t, updates+1, f.count("lease"), "one extra write per conflict (optimistic %v)", optimistic)

		after, err := dedup.DecodeRecord(b.record(t, first.Key))
		require.NoError(t, err)
		require.Equal(t, 1, after.Conflicts)
		require.Equal(t, dedup.PayloadHash("b"), after.LastConflict.PayloadSHA256)
		require.Equal(t, "m-other", after.LastConflict.MessageID)
		require.False(t, after.LastConflict.At.IsZero())
		require.Equal(t, after.LastConflict, after.FirstConflict)
		require.Equal(t, dedup.PayloadHash("a"), after.PayloadSHA256, "the record's own hash stays")
		after.Conflicts, after.FirstConflict, after.LastConflict = 0, nil, nil
		require.Equal(t, before, after, "nothing else of the record changed")
	}
}

// TestConflictNoteThatFailsKeepsTheVerdict: the note is best effort: a
// DynamoDB error on it leaves the delivery a conflict (not a retry), the
// record as it was.
func TestConflictNoteThatFailsKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := withFaults(t, b)
	first := b.proc.Process(context.Background(), msg("1", "a"), process.Hooks{})
	require.Equal(t, process.Delete, first.Action)
	f.inject("lease", failBefore)
	r := b.proc.Process(context.Background(), msg("1", "b"), process.Hooks{})
	require.Equal(t, process.Fail, r.Action)
	require.Equal(t, dedup.Conflict, r.Outcome)
	rec, err := dedup.DecodeRecord(b.record(t, first.Key))
	require.NoError(t, err)
	require.Zero(t, rec.Conflicts)
	require.Nil(t, rec.LastConflict)
}
