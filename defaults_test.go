package exactly_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/idempotency"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/sqsevent"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// TestPublicDefaultsAreTheOnesUsed: the public defaults are written as
// values (so that go doc shows them), and each is the one the internal
// package that applies it uses.
func TestPublicDefaultsAreTheOnesUsed(t *testing.T) {
	t.Parallel()
	require.Equal(t, pool.DefaultConcurrency, exactly.DefaultConcurrency)
	require.Equal(t, pool.DefaultReceivers, exactly.DefaultReceivers)
	require.Equal(t, pool.DefaultWaitTime, exactly.DefaultWaitTime)
	require.Equal(t, pool.DefaultAckDelay, exactly.DefaultAckDelay)
	require.Equal(t, pool.DefaultShutdownTimeout, exactly.DefaultShutdownTimeout)
	require.Equal(t, sqsevent.DefaultConcurrency, exactly.DefaultLambdaConcurrency)
	require.Equal(t, telemetry.DefaultEMFNamespace, exactly.DefaultEMFNamespace)
	require.Equal(t, dedup.MaxResultBytes, idempotency.MaxResultBytes)
	require.Equal(t, dedup.MaxStoredBytes, idempotency.MaxResponseBytesLimit+idempotency.MaxResultBytes,
		"the store holds the largest response the middleware may store and its headers")
}
