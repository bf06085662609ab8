package exactly_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// TestLambdaKnowsTheRedriveLimit: the handler learns a queue's
// maxReceiveCount from the redrive policy it reads at cold start (no call
// more), warns of a FIFO batch as long as it, and warns of and counts (EMF
// ReturnedNearRedrive) a message handed back unstarted with one receive
// left.
func TestLambdaKnowsTheRedriveLimit(t *testing.T) {
	t.Parallel()
	c := memsqs.New()
	url, _ := memsqs.NewQueue(t, c, true, nil, 3)
	arn := arnOf(t, c, url)
	var logs, emf bytes.Buffer
	h := lambdaHandler(t, c, &ranEffect{}, exactly.Config{
		Queues: []string{url}, LeaveToRedrivePolicy: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), EMF: exactly.EMF{Writer: &emf},
	})
	second, third := record(arn, "m2", "A", "d2", "two"), record(arn, "m3", "A", "d3", "three")
	second.Attributes["ApproximateReceiveCount"] = "2" // one receive left of 3
	failed := handle(t, h, record(arn, "m1", "A", "d1", "poison"), second, third)
	require.Len(t, failed, 3)

	var near, long int
	for l := range strings.SplitSeq(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		switch {
		case strings.HasPrefix(msg, "handed back unstarted with at most one receive left"):
			near++
			require.Equal(t, "m2", rec["message_id"])
			require.EqualValues(t, 3, rec["max_receive_count"])
		case strings.HasPrefix(msg, "a FIFO batch holds as many messages that run in order as the queue's maxReceiveCount"):
			long++
		}
	}
	require.Equal(t, 1, near)
	require.Equal(t, 1, long)
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(emf.Bytes()), &line), emf.String())
	require.EqualValues(t, 1, line["ReturnedNearRedrive"])
}
