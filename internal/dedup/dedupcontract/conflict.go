package dedupcontract

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// testConflictNote: a conflict noted on the completed record counts it,
// keeps the first and the latest conflicting payload hash, message and
// time, and changes nothing else (status, token, lease, expiry, result);
// a note for a record replaced since is dropped without an error.
func (s *suite) testConflictNote(t *testing.T) {
	f := s.setup(t)
	st := f.store()
	req := f.req("k", `{"a":1}`, lease, ttl)
	c := f.claim(st, req, dedup.Won)
	require.NoError(t, st.Complete(f.ctx, c, []byte("r"), ttl))
	before := f.item(f.table, "k")

	t1 := f.clock.Now()
	other := f.req("k", `{"a":2}`, lease, ttl)
	other.MessageID = "m-2"
	blocked := f.claim(st, other, dedup.Conflict)
	require.NoError(t, st.NoteConflict(f.ctx, blocked, other.PayloadSHA256, "m-2"))
	f.clock.Advance(time.Second)
	third := f.req("k", `{"a":3}`, lease, ttl)
	blocked3 := f.claim(st, third, dedup.Conflict)
	require.NoError(t, st.NoteConflict(f.ctx, blocked3, third.PayloadSHA256, ""))

	after := f.item(f.table, "k")
	for _, a := range []string{dedup.AttrStatus, dedup.AttrToken, dedup.AttrLeaseUntil, dedup.AttrExpiresAt,
		dedup.AttrPayloadSHA256, dedup.AttrMessageID, dedup.AttrCompletedAt, dedup.AttrResult, dedup.AttrAttempts} {
		require.Equal(t, Render(map[string]types.AttributeValue{a: before[a]}), Render(map[string]types.AttributeValue{a: after[a]}), a)
	}
	rec, err := dedup.DecodeRecord(after)
	require.NoError(t, err)
	require.Equal(t, 2, rec.Conflicts)
	require.Equal(t, dedup.ConflictNote{PayloadSHA256: hash(`{"a":2}`), MessageID: "m-2", At: t1.Truncate(time.Millisecond)}, *rec.FirstConflict)
	require.Equal(t, dedup.ConflictNote{PayloadSHA256: hash(`{"a":3}`), At: t1.Add(time.Second).Truncate(time.Millisecond)}, *rec.LastConflict)
	// A later claim of the same payload is still a duplicate.
	require.Equal(t, []byte("r"), f.claim(st, req, dedup.Duplicate).Record.Result)

	// The record expired and was claimed again: the old conflict's note
	// must not land on the new claim.
	f.clock.Advance(ttl + time.Hour)
	f.claim(st, req, dedup.Won)
	now := f.item(f.table, "k")
	require.NoError(t, st.NoteConflict(f.ctx, blocked, other.PayloadSHA256, "m-2"))
	require.Equal(t, Render(now), Render(f.item(f.table, "k")))
	rec, err = dedup.DecodeRecord(now)
	require.NoError(t, err)
	require.Zero(t, rec.Conflicts)
	require.Nil(t, rec.FirstConflict)

	require.Error(t, st.NoteConflict(f.ctx, dedup.Claim{Outcome: dedup.Duplicate, Key: "k"}, "h", ""))
}
