package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

// startQueues sets up queues on c with setupQueue and reads them as worker
// run does at start-up; it returns the log.
func startQueues(t *testing.T, c *memsqs.Server, specs ...queueSpec) string {
	t.Helper()
	var urls []string
	for _, q := range specs {
		var out bytes.Buffer
		require.NoError(t, setupQueue(context.Background(), c, &out, q))
		for _, l := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(l, "queue "); ok {
				urls = append(urls, u)
			}
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var dlqs []queueDLQ
	for _, u := range urls {
		a := queueAttrs(t, c, u[strings.LastIndexByte(u, '/')+1:])
		dlqs = append(dlqs, queueDLQ{name: u[strings.LastIndexByte(u, '/')+1:], fifo: a["FifoQueue"] == "true",
			perGroup: a["DeduplicationScope"] == "messageGroup", redrive: a["RedrivePolicy"]})
	}
	warnWiderDLQScope(context.Background(), log, c, dlqs)
	return logs.String()
}

// TestStartWarnsOfADLQWiderThanItsQueue: start-up warns of a FIFO DLQ that
// deduplicates more widely than its queue.
func TestStartWarnsOfADLQWiderThanItsQueue(t *testing.T) {
	t.Parallel()
	plain := queueSpec{name: "plain.fifo", dlq: "plain-dlq.fifo", maxReceive: 5, visibility: 30 * time.Second}
	hq := queueSpec{name: "hq.fifo", dlq: "hq-dlq.fifo", maxReceive: 5, visibility: 30 * time.Second, perGroup: true}

	require.Empty(t, startQueues(t, memsqs.New(), plain), "a plain FIFO queue with a plain FIFO DLQ")
	require.Empty(t, startQueues(t, memsqs.New(), hq), "setup gives a high-throughput queue's DLQ its scope")

	// The DLQ of a high-throughput queue as worker setup made it before:
	// plain FIFO.
	c := memsqs.New()
	require.NoError(t, setupQueue(context.Background(), c, &bytes.Buffer{}, hq))
	_, err := c.SetQueueAttributes(context.Background(), sqsSet(mustURL(t, c, "hq-dlq.fifo"), map[string]string{"DeduplicationScope": "queue"}))
	require.NoError(t, err)
	logs := startQueues(t, c, queueSpec{name: "hq.fifo", visibility: 30 * time.Second, perGroup: true})
	require.Contains(t, logs, "dead-letter queue deduplicates more widely than its queue")
	require.Contains(t, logs, "dlq=hq-dlq.fifo")

	// Two queues sharing a DLQ.
	logs = startQueues(t, memsqs.New(),
		queueSpec{name: "a.fifo", dlq: "shared-dlq.fifo", maxReceive: 5, visibility: 30 * time.Second},
		queueSpec{name: "b.fifo", dlq: "shared-dlq.fifo", maxReceive: 5, visibility: 30 * time.Second})
	require.Contains(t, logs, "queues share one FIFO dead-letter queue")
	require.Contains(t, logs, "queues=a.fifo,b.fifo")
}
