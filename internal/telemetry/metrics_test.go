package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// counter sums a counter's series with the given labels (all if nil).
func counter(t *testing.T, m *telemetry.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
	series:
		for _, x := range mf.GetMetric() {
			for _, l := range x.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			sum += x.GetCounter().GetValue()
		}
		return sum
	}
	return 0 // a vector with no series yet
}

// TestDoneCountsOutcomes: each result lands in its counters, commit retries
// included.
func TestDoneCountsOutcomes(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, CommitRetries: 3}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Duplicate}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Retry, Outcome: dedup.Won, CommitRetries: 2, LeaseLost: true}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Fail, Outcome: dedup.Conflict}, time.Millisecond)
	m.ReturnedNearRedrive("q", 3)
	count := func(name string) float64 {
		t.Helper()
		mfs, err := m.Registry.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == name {
				sum := 0.0
				for _, x := range mf.GetMetric() {
					sum += x.GetCounter().GetValue()
				}
				return sum
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	require.Equal(t, 5.0, count("exactly_commit_retries_total"))
	require.Equal(t, 1.0, count("exactly_effects_applied_total"))
	require.Equal(t, 1.0, count("exactly_duplicates_total"))
	require.Equal(t, 1.0, count("exactly_retries_total"))
	require.Equal(t, 1.0, count("exactly_leases_lost_total"))
	require.Equal(t, 1.0, count("exactly_conflicts_total"))
	require.Equal(t, 1.0, count("exactly_permanent_failures_total"))
	require.Equal(t, 3.0, count("exactly_returned_near_redrive_total"))
}

// TestExtensionCountersAreWired: Metrics is a pool.ExtensionObserver, and
// its two counters are registered and count what they are told; failed
// deletes and hand-backs land in batch_entries_failed only.
func TestExtensionCountersAreWired(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	var o pool.Observer = m
	ext, ok := o.(pool.ExtensionObserver)
	require.True(t, ok, "Metrics implements pool.ExtensionObserver")
	ext.ExtensionFailed("q", 3)
	ext.ReceiptStale("q", 1)
	m.BatchFailed("q", "delete", 2)
	q := map[string]string{"queue": "q"}
	require.Equal(t, 3.0, counter(t, m, "exactly_visibility_extension_failures_total", q))
	require.Equal(t, 1.0, counter(t, m, "exactly_visibility_receipts_stale_total", q))
	require.Equal(t, 2.0, counter(t, m, "exactly_batch_entries_failed_total", q))
}

// extFaultSQS fails the first ChangeMessageVisibilityBatch as a whole and
// answers the second with a stale receipt for every entry.
type extFaultSQS struct {
	*memsqs.Server
	calls atomic.Int32
}

func (f *extFaultSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	switch f.calls.Add(1) {
	case 1:
		return nil, errors.New("connection reset by peer")
	case 2:
		out := &sqs.ChangeMessageVisibilityBatchOutput{}
		for _, e := range in.Entries {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("injected"), SenderFault: true})
		}
		return out, nil
	}
	return f.Server.ChangeMessageVisibilityBatch(ctx, in, opts...)
}

type slowProcessor struct{ done chan struct{} }

func (p slowProcessor) Process(context.Context, effect.Message, process.Hooks) process.Result {
	time.Sleep(30 * time.Second)
	close(p.done)
	return process.Result{Action: process.Delete}
}

// TestPoolCountsVisibilityExtensionFailures: a pool with Metrics as its
// observer counts the keeper's failed extension and its stale receipt in
// the two visibility counters, and nothing in batch_entries_failed.
func TestPoolCountsVisibilityExtensionFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &extFaultSQS{Server: memsqs.New()}
		url, _ := memsqs.NewQueue(t, c.Server, false, map[string]string{"VisibilityTimeout": "8"}, 0)
		_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m")})
		require.NoError(t, err)
		m := telemetry.NewMetrics()
		done := make(chan struct{})
		p, err := pool.New(pool.Config{
			Client: c, Queues: []pool.Queue{{URL: url, Visibility: 8 * time.Second, Receivers: 1}},
			Processor: slowProcessor{done: done}, WaitTime: time.Second, Observer: m,
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { p.Run(ctx); close(ran) }()
		<-done
		cancel()
		<-ran

		name := map[string]string{"queue": sqsmsg.QueueName(url)}
		require.Equal(t, 2.0, counter(t, m, "exactly_visibility_extension_failures_total", name), "the failed call and the stale entry")
		require.Equal(t, 1.0, counter(t, m, "exactly_visibility_receipts_stale_total", name))
		require.Zero(t, counter(t, m, "exactly_batch_entries_failed_total", nil), "not counted twice")
	})
}

// TestMetricsRegisterElsewhere: a library user registers the worker's
// series on a registry of their own: every exactly_* series, and no Go or
// process collector that would clash with theirs.
func TestMetricsRegisterElsewhere(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(collectors.NewGoCollector()), "the user's own Go collector")
	require.NoError(t, reg.Register(m))
	// Every series gets a sample, so that each must be in both.
	m.Received("q", 1)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Won, Applied: true, CommitRetries: 1, SentAt: time.Now().Add(-time.Minute)}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Duplicate}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Fail, Outcome: dedup.Conflict}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Retry, Outcome: dedup.Busy}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Retry, Outcome: dedup.Won, LeaseLost: true}, time.Millisecond)
	m.ReceiveError("q", errors.New("x"))
	m.BatchFailed("q", "delete", 1)
	m.ExtensionFailed("q", 1)
	m.ReceiptStale("q", 1)
	m.InFlight(1)
	theirs, err := reg.Gather()
	require.NoError(t, err)
	ours, err := m.Registry.Gather()
	require.NoError(t, err)
	names := func(mfs []*dto.MetricFamily, prefix string) []string {
		var out []string
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), prefix) {
				out = append(out, mf.GetName())
			}
		}
		return out
	}
	require.Equal(t, names(ours, "exactly_"), names(theirs, "exactly_"))
	require.Len(t, names(theirs, "exactly_"), 16)
	require.Empty(t, names(theirs, "process_"), "no process collector of ours")
}

// TestMessageAge: the age of a message when it is done, applied or a
// duplicate, lands in exactly_message_age_seconds; failures do not.
func TestMessageAge(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	sent := time.Now().Add(-90 * time.Second)
	m.Done("q", process.Result{Action: process.Delete, Applied: true, SentAt: sent}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Duplicate, SentAt: sent}, time.Millisecond)
	m.Done("q", process.Result{Action: process.Retry, SentAt: sent}, time.Millisecond)
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "exactly_message_age_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			require.EqualValues(t, 2, h.GetSampleCount())
			require.InDelta(t, 180, h.GetSampleSum(), 5, "two samples of about 90 s")
			return
		}
	}
	t.Fatal("no exactly_message_age_seconds")
}

// TestEffectAndCommitLatency: the effect's and the commit's times land in
// their histograms, only when they ran.
func TestEffectAndCommitLatency(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	m.Done("q", process.Result{Action: process.Delete, Applied: true, EffectTook: 3 * time.Millisecond, CommitTook: 5 * time.Millisecond}, 9*time.Millisecond)
	m.Done("q", process.Result{Action: process.Delete, Outcome: dedup.Duplicate}, time.Millisecond)
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	got := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if h := mf.GetMetric()[0].GetHistogram(); h != nil {
			got[mf.GetName()] = h
		}
	}
	require.EqualValues(t, 1, got["exactly_effect_duration_seconds"].GetSampleCount())
	require.InDelta(t, 0.003, got["exactly_effect_duration_seconds"].GetSampleSum(), 1e-9)
	require.EqualValues(t, 1, got["exactly_commit_duration_seconds"].GetSampleCount())
	require.InDelta(t, 0.005, got["exactly_commit_duration_seconds"].GetSampleSum(), 1e-9)
}
