package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
