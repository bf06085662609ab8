package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestCommitModeNeedsAWritesOnlyEffect: optimistic mode for an effect that
// does not declare its whole effect is its writes fails at start with one
// line naming --commit, before the listener starts. (Not parallel: the
// effect is built with the SDK's configuration, read from the process's
// environment.)
func TestCommitModeNeedsAWritesOnlyEffect(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	var stdout, stderr bytes.Buffer
	code := run(builtins(), []string{"run", "--queue", "http://127.0.0.1:1/000000000000/q.fifo", "--effect", "http", "--http-url", "http://127.0.0.1:1/x"},
		&stdout, &stderr, env("WORKER_COMMIT", "optimistic"))
	require.Equal(t, ExitConfig, code)
	require.Equal(t, "worker: --commit (WORKER_COMMIT) optimistic needs an effect whose whole effect is the DynamoDB writes it returns (one that implements effect.WritesOnly, as effect.WritesFunc does); *builtin.HTTP does not say so: use claim\n", stderr.String())
}

// TestBadConfigFailsWithOneLine: bad configuration exits 2 with one line that
// names the setting (flag and env twin) and the fix, before touching AWS.
func TestBadConfigFailsWithOneLine(t *testing.T) {
	t.Parallel()
	const q = "http://127.0.0.1:1/000000000000/q.fifo"
	cases := []struct {
		name string
		args []string
		env  func(string) (string, bool)
		want string
	}{
		{"no queue", []string{"run", "--effect", "noop"}, env(), "--queue (WORKER_QUEUES) is required"},
		{"queue not a URL", []string{"run", "--effect", "noop", "--queue", "orders.fifo"}, env(), "is not a queue URL"},
		{"no effect", []string{"run", "--queue", q}, env(), "--effect (WORKER_EFFECT) is required: one of http, ledger, noop"},
		{"unknown effect", []string{"run", "--queue", q}, env("WORKER_EFFECT", "ledgr"), `"ledgr" is unknown`},
		{"bad env number", []string{"run", "--queue", q, "--effect", "noop"}, env("WORKER_CONCURRENCY", "lots"), `invalid WORKER_CONCURRENCY="lots": want a whole number`},
		{"bad flag duration", []string{"run", "--queue", q, "--effect", "noop", "--dedup-ttl", "7"}, env(), "--dedup-ttl (WORKER_DEDUP_TTL): want a duration"},
		{"ttl too short", []string{"run", "--queue", q, "--effect", "noop", "--dedup-ttl", "30s"}, env(), "--dedup-ttl (WORKER_DEDUP_TTL) 30s is too short"},
		{"bad dedup key", []string{"run", "--queue", q, "--effect", "noop"}, env("WORKER_DEDUP_KEY", "header:x"), "--dedup-key (WORKER_DEDUP_KEY)"},
		{"namespace with #", []string{"run", "--queue", q, "--effect", "noop", "--namespace", "a#b"}, env(), "--namespace (WORKER_NAMESPACE)"},
		{"zero concurrency", []string{"run", "--queue", q, "--effect", "noop"}, env("WORKER_CONCURRENCY", "0"), "--concurrency (WORKER_CONCURRENCY) must be at least 1"},
		{"wait time out of range", []string{"run", "--queue", q, "--effect", "noop", "--wait-time", "30s"}, env(), "--wait-time (WORKER_WAIT_TIME) must be whole seconds from 1s to 20s"},
		{"unknown commit mode", []string{"run", "--queue", q, "--effect", "noop", "--commit", "fast"}, env(), `--commit (WORKER_COMMIT) "fast": want claim, transactional, optimistic or carried`},
		{"group commit without optimistic", []string{"run", "--queue", q, "--effect", "noop", "--commit", "claim", "--group-commit", "5ms"}, env(), "--group-commit (WORKER_GROUP_COMMIT) is for optimistic mode, and --commit (WORKER_COMMIT) is claim"},
		{"group commit too long", []string{"run", "--queue", q, "--effect", "noop", "--group-commit", "2s"}, env(), "--group-commit (WORKER_GROUP_COMMIT) 2s: want 0 (off) up to 1s"},
		{"confirm destination neither a queue nor a topic", []string{"run", "--queue", q, "--effect", "ledger", "--ledger-table", "l", "--outbox-table", "o", "--ledger-confirm-queue", "arn:aws:sqs:us-east-1:000000000000:c.fifo"}, env(),
			`--ledger-confirm-queue (WORKER_LEDGER_CONFIRM_QUEUE) "arn:aws:sqs:us-east-1:000000000000:c.fifo": want a queue URL`},
		{"confirm topic without the outbox", []string{"run", "--queue", q, "--effect", "ledger", "--ledger-table", "l", "--ledger-confirm-queue", "arn:aws:sns:us-east-1:000000000000:c.fifo"}, env(),
			"--ledger-confirm-queue (WORKER_LEDGER_CONFIRM_QUEUE) needs --outbox-table"},
		{"unknown flag", []string{"run", "--concurency", "3"}, env(), "-concurency"},
		{"stray argument", []string{"run", "--effect", "noop", "extra"}, env(), `unexpected argument "extra"`},
		{"FIFO setting on a standard queue", []string{"setup", "--queue", "orders", "--high-throughput"}, env(), "FIFO settings, and queue \"orders\" is not FIFO"},
		{"FIFO DLQ for a standard queue", []string{"setup", "--queue", "orders", "--dlq", "orders-dlq.fifo"}, env(), "a FIFO queue needs a FIFO dead-letter queue"},
		{"redrive without a queue", []string{"redrive", "--dlq", "http://x/1/q-dlq.fifo"}, env(), "--dlq and --queue are required"},
		{"redrive across queue types", []string{"redrive", "--dlq", "http://x/1/q-dlq.fifo", "--queue", "http://x/1/q"}, env(), "a FIFO queue's dead-letter queue is FIFO"},
		{"unknown command", []string{"sprint"}, env(), `unknown command "sprint"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(builtins(), c.args, &stdout, &stderr, c.env)
			require.Equal(t, ExitConfig, code, "stderr: %s", stderr.String())
			msg := stderr.String()
			if c.name != "unknown command" {
				require.Equal(t, 1, strings.Count(msg, "\n"), "one line: %q", msg)
			}
			require.Contains(t, msg, c.want)
		})
	}
}

func TestFlagWinsOverEnv(t *testing.T) {
	t.Parallel()
	var s settings
	fs := newRunSet(&s, env("WORKER_CONCURRENCY", "7", "WORKER_QUEUES", "http://a/1,http://a/2", "WORKER_DEDUP_TTL", "48h"))
	require.NoError(t, fs.Parse([]string{"--concurrency", "3"}))
	require.Equal(t, 3, s.concurrency)
	require.Equal(t, []string{"http://a/1", "http://a/2"}, s.queues)
	require.Equal(t, "48h0m0s", s.dedupTTL.String())
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitOK, run(builtins(), []string{"version"}, &stdout, &stderr, env()))
	require.Equal(t, "worker "+Version+"\n", stdout.String())
	stdout.Reset()
	require.Equal(t, ExitOK, run(builtins(), []string{"run", "--help"}, &stdout, &stderr, env()))
	require.Contains(t, stderr.String(), "WORKER_SHUTDOWN_TIMEOUT")
	require.Contains(t, stderr.String(), "(default 1m30s)")
	require.Equal(t, ExitConfig, run(builtins(), nil, &stdout, &stderr, env()))
}

func TestDeniedNamesActionAndResource(t *testing.T) {
	t.Parallel()
	err := denied(fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}),
		"dynamodb:DescribeTable", "table exactly-dedup")
	var cerr *config.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "permission denied: the worker's role needs dynamodb:DescribeTable on table exactly-dedup (not authorized)", cerr.Msg)

	err = denied(&smithy.GenericAPIError{Code: "InvalidClientTokenId", Message: "bad token"}, "sqs:GetQueueAttributes", "q")
	require.ErrorAs(t, err, &cerr)
	require.Contains(t, cerr.Msg, "AWS credentials rejected")

	other := errors.New("connection refused")
	require.Same(t, other, denied(other, "x", "y"))
}

// TestDocsConfigTableIsComplete: docs/CONFIGURATION.md's Configure table has
// a row for every flag of `worker run`, with its environment twin.
func TestDocsConfigTableIsComplete(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/CONFIGURATION.md")
	require.NoError(t, err)
	var s settings
	fs := newRunSet(&s, env())
	n := 0
	fs.FlagSet().VisitAll(func(f *flag.Flag) {
		n++
		name := fs.Name(f.Name) // "--flag (ENV)"
		flagName, envName, _ := strings.Cut(strings.TrimSuffix(name, ")"), " (")
		row := "| `" + flagName + "` | `" + envName + "` |"
		require.Contains(t, string(readme), row, "docs/CONFIGURATION.md's Configure table lacks a row %s", row)
	})
	require.Greater(t, n, 20)
}

// TestDocsMetricsTableIsComplete: docs/OPERATE.md's metrics table has a row
// for every exactly_* series the worker serves on /metrics.
func TestDocsMetricsTableIsComplete(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/OPERATE.md")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics()
	reg.MustRegister(m)
	telemetry.RegisterBuildInfo(reg, "test")
	telemetry.NewRequests(reg)
	descs := make(chan *prometheus.Desc, 100)
	go func() { reg.Describe(descs); close(descs) }()
	n := 0
	for d := range descs {
		name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())[1]
		if !strings.HasPrefix(name, "exactly_") {
			continue
		}
		n++
		require.Regexp(t, "\\| `"+regexp.QuoteMeta(name)+"(\\{[a-z_,]+\\})?` \\|", string(readme), "docs/OPERATE.md's metrics table lacks %s", name)
	}
	require.GreaterOrEqual(t, n, 17)
}

// TestEveryCommitCombination: each documented combination of --effect,
// --commit and --group-commit either starts (both checks pass: the one before
// the effect is built, and the one with it) or fails with one line naming the
// setting. The mode an empty --commit picks is the effect's: optimistic for a
// WritesOnly effect (ledger, noop), claim otherwise (http).
func TestEveryCommitCombination(t *testing.T) {
	t.Parallel()
	const q = "http://127.0.0.1:1/000000000000/q.fifo"
	writesOnly := map[string]bool{"ledger": true, "noop": true, "http": false}
	for _, eff := range []string{"ledger", "noop", "http"} {
		for _, commit := range []string{"", "claim", "transactional", "optimistic"} {
			for _, group := range []string{"0s", "5ms"} {
				t.Run(eff+"/"+commit+"/"+group, func(t *testing.T) {
					t.Parallel()
					mode := commit
					if mode == "" {
						mode = map[bool]string{true: "optimistic", false: "claim"}[writesOnly[eff]]
					}
					var want string
					switch {
					case group != "0s" && mode != "optimistic" && commit != "":
						// Known before the effect is built: said first.
						want = "--group-commit (WORKER_GROUP_COMMIT) is for optimistic mode, and --commit (WORKER_COMMIT) is " + mode
					case (mode == "transactional" || mode == "optimistic") && !writesOnly[eff]:
						want = "--commit (WORKER_COMMIT) " + mode + " needs an effect whose whole effect is the DynamoDB writes"
					case group != "0s" && mode != "optimistic":
						want = "--group-commit (WORKER_GROUP_COMMIT) is for optimistic mode, and --commit (WORKER_COMMIT) is " + mode
					}
					s := settings{effects: builtins()}
					fs := newRunSet(&s, env())
					args := []string{"--queue", q, "--effect", eff, "--group-commit", group, "--ledger-table", "l", "--http-url", "http://127.0.0.1:1/x"}
					if commit != "" {
						args = append(args, "--commit", commit)
					}
					require.NoError(t, fs.Parse(args))
					err := s.validate(fs, false)
					if err == nil {
						e, ferr := s.effects[eff](Env{LedgerTable: s.ledgerTable, HTTPURL: s.httpURL, HTTPClient: http.DefaultClient, Log: slog.Default()})
						require.NoError(t, ferr)
						err = cliError(fs, s.config(nil, e, nil, nil).Validate())
					}
					if want == "" {
						require.NoError(t, err)
						return
					}
					require.ErrorContains(t, err, want)
					require.NotContains(t, err.Error(), "\n")
				})
			}
		}
	}
}
