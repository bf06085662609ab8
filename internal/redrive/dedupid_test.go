package redrive_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/outbox"
)

// A copy's dedup id names its DLQ message and differs per receive; when
// that would not be a valid MessageDeduplicationId (over 128 characters,
// or a character SQS refuses), it is a hash of both, still valid, still
// per receive, and names no message.
func TestCopyDeduplicationID(t *testing.T) {
	const id = "6f0c1f5e-8d3a-4b7e-9a51-2c4d6e8f0a1b"
	a, b := redrive.CopyDeduplicationID(id, "receipt-1"), redrive.CopyDeduplicationID(id, "receipt-2")
	require.NotEqual(t, a, b, "one id per receive")
	require.Equal(t, a, redrive.CopyDeduplicationID(id, "receipt-1"), "the same receive, the same id")
	require.True(t, outbox.ValidID(a))
	from, ok := redrive.CopiedFrom(a)
	require.True(t, ok)
	require.Equal(t, id, from)

	for name, long := range map[string]string{
		"too long":   strings.Repeat("m", 120),
		"not ASCII":  "message-é",
		"with space": "message id",
	} {
		t.Run(name, func(t *testing.T) {
			h1, h2 := redrive.CopyDeduplicationID(long, "receipt-1"), redrive.CopyDeduplicationID(long, "receipt-2")
			require.True(t, strings.HasPrefix(h1, "redrive-sha256-"), h1)
			require.True(t, outbox.ValidID(h1), "a valid MessageDeduplicationId: %q", h1)
			require.LessOrEqual(t, len(h1), 128)
			require.NotEqual(t, h1, h2, "one id per receive")
			require.NotEqual(t, h1, redrive.CopyDeduplicationID(long+"x", "receipt-1"), "one id per message")
			_, ok := redrive.CopiedFrom(h1)
			require.False(t, ok, "a hashed id names no message")
		})
	}
	_, ok = redrive.CopiedFrom("o7/ob-1040")
	require.False(t, ok, "an id the redrive did not make")
}
