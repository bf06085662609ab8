package worker

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/cli"
)

// TestMainStampsTheVersion: the version stamped into this package at build
// time is the one the command line reports and logs.
func TestMainStampsTheVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9-test"
	if code := Main([]string{"version"}); code != ExitOK {
		t.Fatalf("worker version exited %d", code)
	}
	if cli.Version != "v9.9.9-test" {
		t.Fatalf("the command line reports %q", cli.Version)
	}
}
