package exactly_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// sumEMF sums a metric over EMF lines.
func sumEMF(t *testing.T, out string, name string) (sum float64, lines int) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		require.Contains(t, doc, "_aws")
		v, _ := doc[name].(float64)
		sum += v
		lines++
	}
	return sum, lines
}

// TestWorkerWritesEMF: with Config.EMF, a Worker writes its metrics every
// interval and once when drained; over its lines, every message counts once.
func TestWorkerWritesEMF(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memsqs.New()
		url, _ := memsqs.NewQueue(t, c, true, nil, 5)
		var out testenv.SyncBuffer
		w, err := exactly.New(context.Background(), exactly.Config{
			SQS: c, DynamoDB: memTable(t), Table: "dedup", Queues: []string{url}, Effect: builtin.Noop{},
			WaitTime: time.Second, EMF: exactly.EMF{Writer: &out, Interval: 20 * time.Second},
		})
		require.NoError(t, err)
		sendAndRun(t, c, url, w, 12, 3)
		applied, lines := sumEMF(t, out.String(), "Applied")
		require.EqualValues(t, 12, applied)
		received, _ := sumEMF(t, out.String(), "Received")
		require.EqualValues(t, 12, received)
		require.GreaterOrEqual(t, lines, 1)
		require.Contains(t, out.String(), `"Queue":"`+sqsmsg.QueueName(url)+`"`)
	})
	_, err := exactly.New(context.Background(), exactly.Config{SQS: memsqs.New(), DynamoDB: memTable(t), Table: "dedup",
		Queues: []string{"https://sqs.eu-west-1.amazonaws.com/1/q.fifo"}, Effect: builtin.Noop{}, EMF: exactly.EMF{Interval: time.Millisecond}})
	var ce *exactly.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "EMF.Interval", ce.Setting)
}

// TestLambdaObservability: a Lambda handler writes each batch's EMF line
// before it answers, counts into the Prometheus registry and calls the
// Done hook for every record, as a Worker does.
func TestLambdaObservability(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, _ := memsqs.NewQueue(t, c, true, nil, 5)
	arn := arnOf(t, c, url)
	var out bytes.Buffer
	var mu sync.Mutex
	outcomes := map[exactly.Outcome]int{}
	reg := prometheus.NewRegistry()
	h := lambdaHandler(t, c, &ranEffect{}, exactly.Config{Queues: []string{url}, Registerer: reg,
		EMF: exactly.EMF{Writer: &out, Namespace: "payments"},
		Hooks: exactly.Hooks{Done: func(d exactly.Done) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[d.Outcome]++
		}}})
	// m3 repeats m1's dedup id in m1's own group, so it runs after m1
	// has committed and is a duplicate every time; in a group of its own
	// it could meet m1's claim in flight and be retried as busy.
	require.Empty(t, handle(t, h, record(arn, "m1", "g", "d1", "a"), record(arn, "m2", "g", "d2", "b"), record(arn, "m3", "g", "d1", "a")))
	applied, lines := sumEMF(t, out.String(), "Applied")
	require.Equal(t, 1, lines, "one line for the batch's queue")
	require.EqualValues(t, 2, applied)
	dups, _ := sumEMF(t, out.String(), "Duplicates")
	require.EqualValues(t, 1, dups)
	require.Contains(t, out.String(), `"Namespace":"payments"`)
	require.Equal(t, map[exactly.Outcome]int{exactly.Applied: 2, exactly.Duplicate: 1}, outcomes)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "exactly_effects_applied_total" {
			found = true
			require.EqualValues(t, 2, mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	require.True(t, found, "the handler counts into the registry")
}
