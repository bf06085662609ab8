package chaos

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestRunSmall is a short chaos run against the local stack: the harness
// itself (build, setup, proxies, supervisor, producer, verifiers, the
// downstream of claim mode) under the race detector, with both effects and
// every kind of chaos action and fault.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: not in -short")
	}
	testenv.SQS(t)
	testenv.DynamoDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var out testenv.SyncBuffer
	rep, err := Run(ctx, Config{
		N: 80, Groups: 8, ExactPct: 10, RetryPct: 10, Poison: 2, Sleepers: 2, SleepFor: 4 * time.Second,
		Workers: 3, Concurrency: 4, Visibility: 3 * time.Second, Lease: 3 * time.Second, MaxReceive: 10,
		ShutdownTimeout: 2 * time.Second, ResetPct: 3, DropPct: 3, Err5xxPct: 2, ThrottlePct: 2, TxConflictPct: 10, Burst: 3,
		SendFor: 8 * time.Second, ChaosEvery: 1500 * time.Millisecond, Stall: 7 * time.Second, KillPct: 50, Terms: 1,
		Timeout: 2 * time.Minute, Seed: 7, Dir: dir,
	}, &out)
	require.NoError(t, err, out.String())
	require.True(t, rep.OK(), out.String())
	report := out.String()
	require.Contains(t, report, "== chaos PASS (ledger effect, optimistic and transactional modes, outbox chain): n=80")
	require.Contains(t, report, "chain: accounts whose confirmations equal their deposits |        8 |      8 | ok")
	require.Contains(t, report, "== chaos PASS (http effect, claim mode): n=80")
	require.Contains(t, report, "== chaos PASS: effects ledger,http")
	require.Contains(t, report, "keys applied exactly once")
	require.Contains(t, report, "keys called at least once")
	require.Contains(t, report, "downstream calls: ")
	require.Regexp(t, `SIGKILL \d+`, report)
	require.Contains(t, report, "SIGTERM")
	require.Contains(t, report, "faults injected")
	require.FileExists(t, dir+"/events.log")
	for _, f := range []string{"ledger/report.txt", "ledger/trace.log", "ledger/w1.1.log", "ledger/relay/w1.1.log", "ledger/confirmed/w1.1.log", "http/report.txt", "http/trace.log", "http/calls.log", "http/w1.1.log"} {
		require.FileExists(t, dir+"/"+f)
	}
	t.Log(report)
}

func TestParseEffects(t *testing.T) {
	c, err := Parse(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"ledger", "http"}, c.Effects)
	c, err = Parse([]string{"-effect", "http"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"http"}, c.Effects)
	_, err = Parse([]string{"-effect", "ledger,smtp"}, io.Discard)
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
	_, err = Parse([]string{"-err5xx", "30", "-throttle", "30"}, io.Discard)
	require.ErrorAs(t, err, &ue)
}
