package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/config"
)

// TestConsoleRefusesAnOpenAddressWithoutAuth: beyond loopback the console
// wants --auth-file; the error is one line naming it. A weak or malformed
// auth file is refused too, before anything listens.
func TestConsoleRefusesAnOpenAddressWithoutAuth(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:8080"} {
		var stdout, stderr bytes.Buffer
		code := run(builtins(), []string{"console", "--addr", addr}, &stdout, &stderr, env())
		require.Equal(t, ExitConfig, code, addr)
		require.Equal(t, "worker: --addr (WORKER_CONSOLE_ADDR) "+addr+" is not a loopback address: give --auth-file (WORKER_CONSOLE_AUTH_FILE) (a file holding user:password) to listen there\n", stderr.String())
	}
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak")
	require.NoError(t, os.WriteFile(weak, []byte("ops:short\n"), 0o600))
	var stdout, stderr bytes.Buffer
	code := run(builtins(), []string{"console", "--addr", "0.0.0.0:0", "--auth-file", weak}, &stdout, &stderr, env())
	require.Equal(t, ExitConfig, code)
	require.Contains(t, stderr.String(), "--auth-file (WORKER_CONSOLE_AUTH_FILE) "+weak+": want one line user:password")
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"))
	code = run(builtins(), []string{"console", "--addr", "0.0.0.0:0", "--auth-file", filepath.Join(dir, "missing")}, &stdout, &stderr, env())
	require.Equal(t, ExitConfig, code)

	s := consoleSettings{addr: "127.0.0.1:8080"}
	u, p, err := s.auth(nil, os.ReadFile)
	require.NoError(t, err, "loopback needs no auth")
	require.Empty(t, u+p)
}

// TestConsoleQueueFlag: worker console takes --queue, repeatable, as every
// other command does; --queues stays as the old spelling, and a flag given
// is not added to by WORKER_QUEUES.
func TestConsoleQueueFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want []string
	}{
		{[]string{"--queue", "http://q/a", "--queue", "http://q/b"}, nil, []string{"http://q/a", "http://q/b"}},
		{[]string{"--queue", "http://q/a,http://q/b"}, nil, []string{"http://q/a", "http://q/b"}},
		{[]string{"--queues", "http://q/a,http://q/b"}, nil, []string{"http://q/a", "http://q/b"}},
		{[]string{"--queues", "http://q/a"}, []string{"WORKER_QUEUES", "http://q/env"}, []string{"http://q/a"}},
		{[]string{"--queue", "http://q/a"}, []string{"WORKER_QUEUES", "http://q/env"}, []string{"http://q/a"}},
		{nil, []string{"WORKER_QUEUES", "http://q/env,http://q/env2"}, []string{"http://q/env", "http://q/env2"}},
	} {
		var s consoleSettings
		fs := config.NewSet("worker console", io.Discard, env(c.env...))
		s.define(fs)
		require.NoError(t, fs.Parse(c.args), c.args)
		require.Equal(t, c.want, s.queues, "%v %v", c.args, c.env)
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(builtins(), []string{"console", "--help"}, &stdout, &stderr, env()))
	require.Contains(t, stdout.String()+stderr.String(), "-queue value")
	require.Contains(t, stdout.String()+stderr.String(), "deprecated: the old spelling of --queue")
}

// TestConsoleAllowedHostChecked: an --allowed-host that is not a name as a
// browser sends it in Host stops the console at once, naming the flag.
func TestConsoleAllowedHostChecked(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	var stdout, stderr bytes.Buffer
	code := run(builtins(), []string{"console", "--allowed-host", "https://console.example.com/"}, &stdout, &stderr, env())
	require.Equal(t, ExitConfig, code)
	require.Contains(t, stderr.String(), `--allowed-host (WORKER_CONSOLE_ALLOWED_HOSTS): allowed host "https://console.example.com/": want a name or name:port`)
}
