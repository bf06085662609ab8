package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeWorker writes a shell script that behaves like a worker to the
// supervisor: it logs the metrics address, appends its arguments to
// $FAKE_ARGS, exits 0 on SIGTERM, and exits 3 on its own when $FAKE_DIE
// names an existing file (which it removes). It logs its one error line
// before the line that says it serves, so that every life the supervisor saw
// up has logged it, however soon it is stopped.
func fakeWorker(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker.sh")
	script := `#!/bin/sh
echo "$@" >> "$FAKE_ARGS"
trap 'echo "{\"level\":\"INFO\",\"msg\":\"worker stopped\"}" >&2; exit 0' TERM
echo '{"level":"ERROR","msg":"permanent failure: left to the queue'"'"'s redrive policy"}' >&2
echo '{"level":"INFO","msg":"serving /healthz, /readyz and /metrics","addr":"127.0.0.1:1"}' >&2
while :; do
	if [ -f "$FAKE_DIE" ]; then rm -f "$FAKE_DIE"; exit 3; fi
	sleep 0.02
done
`
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

func TestSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argsFile, die := filepath.Join(dir, "args"), filepath.Join(dir, "die")
	var mu sync.Mutex
	var logged []string
	s := NewSupervisor(WorkerSpec{
		Bin: fakeWorker(t), Args: []string{"run", "--namespace", "ns{n}"},
		Env: func(n int) []string {
			return append(os.Environ(), "FAKE_ARGS="+argsFile, fmt.Sprintf("FAKE_DIE=%s%d", die, n))
		},
		LogDir: dir, ShutdownLimit: 3 * time.Second,
	}, 2, func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	require.NoError(t, s.Start(context.Background(), 10*time.Second))
	require.Equal(t, 2, s.Up())
	args, err := os.ReadFile(argsFile)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"run --namespace ns1", "run --namespace ns2"}, strings.Split(strings.TrimSpace(string(args)), "\n"))

	w1, w2 := s.slots[0], s.slots[1]
	s.Kill(w1, 0)
	require.Equal(t, 2, w1.life, "a killed worker is replaced")
	require.Equal(t, 2, s.Up())

	s.Stall(context.Background(), w2, 100*time.Millisecond)
	require.Equal(t, 2, s.Up(), "a stalled worker goes on")

	s.Term(w2, true)
	require.Equal(t, 2, w2.life)

	// A worker that dies on its own is restarted and reported.
	require.NoError(t, os.WriteFile(die+"1", nil, 0o644))
	require.Eventually(t, func() bool { return len(s.Summary().Exits) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return s.Up() == 2 }, 10*time.Second, 10*time.Millisecond)

	s.StopAll()
	require.Zero(t, s.Up())
	sum := s.Summary()
	require.Equal(t, 1, sum.Events["SIGKILL"])
	require.Equal(t, 1, sum.Events["SIGSTOP"])
	require.Equal(t, 3, sum.Events["SIGTERM"], "one during the run, two at the end")
	require.Equal(t, 3, sum.Events["restart"])
	require.Equal(t, 1, sum.Events["unexpected exit"])
	require.Contains(t, sum.Exits[0], "exit code 3")
	require.Len(t, sum.Stops, 3)
	for _, st := range sum.Stops {
		require.Zero(t, st.ExitCode, st.Worker)
		require.Less(t, st.Took, st.Limit)
	}
	require.Equal(t, 5, sum.Errors["permanent failure: left to the queue's redrive policy"], "one per life: w1.1-3, w2.1-2")
	require.FileExists(t, filepath.Join(dir, "w1.2.log"))
	log1, err := os.ReadFile(filepath.Join(dir, "w2.1.log"))
	require.NoError(t, err)
	require.Contains(t, string(log1), `"msg":"worker stopped"`)
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	m, err := parseMetrics(strings.NewReader(`# HELP exactly_effects_applied_total Effects.
# TYPE exactly_effects_applied_total counter
exactly_effects_applied_total{queue="a.fifo"} 24
exactly_effects_applied_total{queue="b.fifo"} 6
exactly_aws_requests_total{operation="PutItem",service="DynamoDB"} 31
exactly_handler_duration_seconds_bucket{queue="a.fifo",outcome="won",le="0.1"} 3
exactly_messages_in_flight 2
go_goroutines 12
`))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"exactly_effects_applied_total": 30, "aws DynamoDB PutItem": 31}, m)
}
