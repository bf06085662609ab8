// Package localstack_test checks the LocalStack setup offline: Docker is not
// available where CI runs, so nothing here starts it. The compose file must
// parse and pin what README.md promises; the init scripts must be runnable
// by LocalStack (executable, LF, shebang) and create what the worker expects.
// make tf-check adds bash -n, shellcheck and the Compose Specification loader.
package localstack_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/dedup"
)

const image = "localstack/localstack:4.14.0" // the last tag that starts without an auth token

type compose struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck struct {
			Test        any    `yaml:"test"`
			Interval    string `yaml:"interval"`
			Timeout     string `yaml:"timeout"`
			Retries     int    `yaml:"retries"`
			StartPeriod string `yaml:"start_period"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

func load(t *testing.T) compose {
	t.Helper()
	src, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&c))
	return c
}

func TestComposeFile(t *testing.T) {
	c := load(t)
	require.Equal(t, "exactly-localstack", c.Name, "make localstack-down relies on the project name")
	require.Len(t, c.Services, 1)
	ls, ok := c.Services["localstack"]
	require.True(t, ok)

	require.Equal(t, image, ls.Image, "pinned: later images need an auth token")
	require.Equal(t, []string{"127.0.0.1:4566:4566"}, ls.Ports, "loopback only; localstack-test uses 127.0.0.1:4566")
	require.Equal(t, "${LOCALSTACK_SERVICES:-sqs,dynamodb}", ls.Environment["SERVICES"], "SQS and DynamoDB only by default")
	require.Equal(t, "us-east-1", ls.Environment["AWS_DEFAULT_REGION"])
	require.Contains(t, ls.Volumes, "./init/ready.d:/etc/localstack/init/ready.d:ro")

	test, ok := ls.Healthcheck.Test.(string)
	require.True(t, ok, "healthcheck.test is a shell string (CMD-SHELL)")
	require.Contains(t, test, "/_localstack/init/ready", "healthy only after the init scripts ran")
	require.Contains(t, test, `"ERROR"`, "a failed init script keeps it unhealthy")
	require.Positive(t, ls.Healthcheck.Retries)

	// Compose interpolates $VAR and ${...}; a shell $ must be written $$.
	src, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		stripped := strings.ReplaceAll(line, "$$", "")
		for _, m := range regexp.MustCompile(`\$(.?)`).FindAllStringSubmatch(stripped, -1) {
			require.Equal(t, "{", m[1], "line %d: a lone $ is interpolated by Compose; write $$", i+1)
		}
	}
}

func scripts(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob("init/ready.d/*")
	require.NoError(t, err)
	require.NotEmpty(t, found)
	return found
}

func TestInitScriptsRunUnderLocalStack(t *testing.T) {
	for _, path := range scripts(t) {
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(path, ".sh"), "%s: LocalStack runs .sh and .py files only", path)
		require.NotZero(t, info.Mode().Perm()&0o111, "%s: LocalStack runs only executable scripts", path)

		src, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NotContains(t, string(src), "\r", "%s: CRLF breaks the shebang", path)
		require.True(t, strings.HasPrefix(string(src), "#!/bin/bash\n"), "%s: needs a bash shebang", path)
		require.Contains(t, string(src), "set -euo pipefail", "%s: a failing call must fail the script", path)
	}
}

// fakeAWSLocal stands in for LocalStack's awslocal: it records every call
// and answers the few whose output the scripts read.
const fakeAWSLocal = `#!/bin/bash
{ for a in "$@"; do printf '%s\x1f' "$a"; done; printf '\x1e'; } >>"$AWSLOCAL_LOG"
arg() { local want=$1; shift; while [ $# -gt 0 ]; do [ "$1" = "$want" ] && { echo "$2"; return; }; shift; done; }
case "$1 $2" in
"sqs create-queue") echo "http://localstack:4566/000000000000/$(arg --queue-name "$@")" ;;
"sqs get-queue-attributes") u=$(arg --queue-url "$@"); echo "arn:aws:sqs:us-east-1:000000000000:${u##*/}" ;;
"dynamodb describe-table") exit 254 ;;
"dynamodb describe-time-to-live") echo DISABLED ;;
esac
`

type call []string

func (c call) is(service, op string) bool { return len(c) > 1 && c[0] == service && c[1] == op }

func (c call) arg(t *testing.T, name string) string {
	t.Helper()
	i := slices.Index(c, name)
	require.True(t, i >= 0 && i+1 < len(c), "%v has no %s", c, name)
	return c[i+1]
}

// runScripts runs every init script, in LocalStack's order, against fakeAWSLocal.
func runScripts(t *testing.T) []call {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "awslocal"), []byte(fakeAWSLocal), 0o755))
	paths := scripts(t)
	sort.Strings(paths)
	for _, path := range paths {
		cmd := exec.Command(bash, path)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "AWSLOCAL_LOG="+log)
		for _, e := range []string{"EXACTLY_QUEUE_NAME", "EXACTLY_DLQ_NAME", "EXACTLY_DEDUP_TABLE", "EXACTLY_LEDGER_TABLE",
			"EXACTLY_MAX_RECEIVE_COUNT", "EXACTLY_VISIBILITY_TIMEOUT"} {
			cmd.Env = append(cmd.Env, e+"=") // the defaults, not the caller's
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", path, out)
	}
	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	var calls []call
	for _, rec := range strings.Split(strings.TrimSuffix(string(raw), "\x1e"), "\x1e") {
		calls = append(calls, strings.Split(strings.TrimSuffix(rec, "\x1f"), "\x1f"))
	}
	return calls
}

func attributes(t *testing.T, c call) map[string]string {
	t.Helper()
	raw := c.arg(t, "--attributes")
	out := map[string]string{}
	if strings.HasPrefix(raw, "{") {
		require.NoError(t, json.Unmarshal([]byte(raw), &out), "attributes are not JSON: %s", raw)
		return out
	}
	for _, kv := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, raw)
		out[k] = v
	}
	return out
}

// TestInitScriptsCreateWhatTheWorkerExpects runs the scripts and checks what
// they ask LocalStack for: the demo queue and DLQ, the worker's default
// tables, its hash key and its TTL attribute.
func TestInitScriptsCreateWhatTheWorkerExpects(t *testing.T) {
	queues := map[string]map[string]string{}
	var allow map[string]string
	tables := map[string]call{}
	var ttl call
	for _, c := range runScripts(t) {
		switch {
		case c.is("sqs", "create-queue"):
			queues[c.arg(t, "--queue-name")] = attributes(t, c)
		case c.is("sqs", "set-queue-attributes"):
			require.True(t, strings.HasSuffix(c.arg(t, "--queue-url"), "/exactly-demo-dlq.fifo"))
			allow = attributes(t, c)
		case c.is("dynamodb", "create-table"):
			tables[c.arg(t, "--table-name")] = c
		case c.is("dynamodb", "update-time-to-live"):
			ttl = c
		}
	}

	const dlqARN = "arn:aws:sqs:us-east-1:000000000000:exactly-demo-dlq.fifo"
	require.Len(t, queues, 2)
	dlq, queue := queues["exactly-demo-dlq.fifo"], queues["exactly-demo.fifo"]
	require.Equal(t, "true", dlq["FifoQueue"], "a FIFO queue needs a FIFO DLQ")
	require.Equal(t, "true", queue["FifoQueue"])
	require.Equal(t, "30", queue["VisibilityTimeout"])
	require.Equal(t, "true", queue["SqsManagedSseEnabled"])

	var redrive struct {
		DeadLetterTargetArn string
		MaxReceiveCount     int
	}
	require.NoError(t, json.Unmarshal([]byte(queue["RedrivePolicy"]), &redrive), queue["RedrivePolicy"])
	require.Equal(t, dlqARN, redrive.DeadLetterTargetArn)
	require.Equal(t, 5, redrive.MaxReceiveCount)

	var allowPolicy struct {
		RedrivePermission string
		SourceQueueArns   []string
	}
	require.NoError(t, json.Unmarshal([]byte(allow["RedriveAllowPolicy"]), &allowPolicy), allow["RedriveAllowPolicy"])
	require.Equal(t, "byQueue", allowPolicy.RedrivePermission)
	require.Equal(t, []string{"arn:aws:sqs:us-east-1:000000000000:exactly-demo.fifo"}, allowPolicy.SourceQueueArns)

	require.Len(t, tables, 2)
	for _, name := range []string{cli.DefaultDedupTable, cli.DefaultLedgerTable} {
		c, ok := tables[name]
		require.True(t, ok, "table %s is not created", name)
		require.Equal(t, "AttributeName="+dedup.AttrPK+",AttributeType=S", c.arg(t, "--attribute-definitions"), name)
		require.Equal(t, "AttributeName="+dedup.AttrPK+",KeyType=HASH", c.arg(t, "--key-schema"), name)
		require.Equal(t, "PAY_PER_REQUEST", c.arg(t, "--billing-mode"), name)
	}
	require.NotNil(t, ttl, "TTL is not enabled")
	require.Equal(t, cli.DefaultDedupTable, ttl.arg(t, "--table-name"))
	require.Equal(t, "Enabled=true,AttributeName="+dedup.AttrExpiresAt, ttl.arg(t, "--time-to-live-specification"))
}
