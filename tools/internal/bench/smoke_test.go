package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestHarnessSmoke runs the whole harness briefly against the local stack:
// it builds and runs the worker, scrapes its /metrics and the baseline, and
// renders the reports. A renamed metric or log line in the worker breaks it.
// The window is a few seconds so that a loaded machine still sees receives
// in it (with 1 s, a worker holding a full in-flight buffer made none), and
// long enough that the messages under way at its edges stay a small part of
// it: a group-commit worker keeps up to 2×concurrency + 10 per receiver
// commits under way, and with 3 s on a loaded machine its write units per
// message once read 5.39 against 6.
func TestHarnessSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: runs the worker against the emulators")
	}
	testenv.SQS(t)
	testenv.DynamoDB(t)
	var log bytes.Buffer
	res, err := Run(t.Context(), Config{
		Procs: []int{1}, Concurrency: []int{2}, Warmup: 500 * time.Millisecond, Window: 6 * time.Second,
		LimitConcurrency: []int{4}, LimitMessages: 200, LimitDuration: 500 * time.Millisecond,
		LatencyDuration: time.Second, MaxPrefill: 500, Log: &log, Compare: []string{"transactional", "grouped"},
		FakeGroups: 16, RelayGroups: []int{200}, RelayWriters: 2,
	})
	require.NoError(t, err, log.String())
	require.Len(t, res.Limits, 2)
	// Both regimes: the aws-like one runs the hand-written consumer, the
	// worker and group commit (transactional is compared at emulator
	// speed only), then one hot group and the relay.
	require.Len(t, res.Runs, 4+3)
	require.Len(t, res.HotGroup, 3)
	require.Len(t, res.Relay, 3)
	require.NotNil(t, res.Profile)
	require.Positive(t, res.Profile.Total)
	for _, d := range res.Runs {
		// Every consumer is its own process: its CPU and memory are read.
		require.Positive(t, d.CPUPerMessage(), "%s %s", d.regime(), d.Consumer)
		require.Positive(t, d.PeakRSS(), "%s %s", d.regime(), d.Consumer)
	}
	for _, d := range res.HotGroup {
		require.Positive(t, d.GroupWait(), d.Consumer)
	}
	require.NotEmpty(t, res.Targets())
	require.Positive(t, res.Limits[0].SQS)
	require.Positive(t, res.Limits[0].Put)
	require.Positive(t, res.Limits[0].Path)
	require.Positive(t, res.Limits[1].Put)
	for _, d := range res.Runs {
		require.Positive(t, d.Rate, "%s: %s", d.Consumer, log.String())
		require.Positive(t, d.Window.Requests["SQS.ReceiveMessage"], d.Consumer)
		require.Zero(t, d.Window.Counts["retries"]+d.Window.Counts["permanent"]+d.Window.Counts["failed"], d.Consumer)
	}
	w, ok := res.find("worker", 1, 2)
	require.True(t, ok)
	// The ledger commits optimistically by default: one transaction per
	// message, no claim.
	require.Zero(t, w.Window.Requests["DynamoDB.PutItem"])
	require.Positive(t, w.Window.Requests["DynamoDB.TransactWriteItems"])
	require.Positive(t, w.Window.Requests["SQS.DeleteMessageBatch"])
	// The budget, through the real binary's /metrics: the ledger's record,
	// account update and entry in one transaction, 2 units each; the
	// baseline's two ledger writes.
	wb, ok := w.Window.Budget()
	require.True(t, ok)
	require.InDelta(t, 6, wb.WriteUnits, 0.5)
	bl, ok := res.find("baseline", 1, 2)
	require.True(t, ok)
	bb, ok := bl.Window.Budget()
	require.True(t, ok)
	require.InDelta(t, 4, bb.WriteUnits, 0.5)
	// Transactional mode beside it: the claim's PutItem, then the same
	// transaction.
	tx, ok := res.find("worker/transactional", 1, 2)
	require.True(t, ok)
	tb, ok := tx.Window.Budget()
	require.True(t, ok)
	require.InDelta(t, 7, tb.WriteUnits, 0.5)
	require.Positive(t, tx.Window.Requests["DynamoDB.PutItem"])
	// Group commit: the same write units, fewer or as many requests.
	gr, ok := res.find("worker/grouped", 1, 2)
	require.True(t, ok)
	gb, ok := gr.Window.Budget()
	require.True(t, ok)
	require.InDelta(t, 6, gb.WriteUnits, 0.5)
	require.LessOrEqual(t, gr.Op("DynamoDB.TransactWriteItems"), 1.1, "at most one transaction per message, less where commits meet")
	require.Len(t, res.Latency, 2)
	for _, p := range res.Latency {
		require.Positive(t, p.Messages, p.Consumer)
		require.LessOrEqual(t, p.P50, p.P99)
	}
	var text bytes.Buffer
	WriteText(&text, res)
	require.Contains(t, text.String(), "worker ×1")
	require.Contains(t, Chart(res), "<polyline")
}
