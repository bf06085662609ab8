// Package worker is the stock command line of exactly (run, lambda, setup,
// send, redrive, healthcheck, ...) for binaries of your own: register your
// effects with effect.Register, then call Main from your main. The worker
// binary (cmd/worker) is exactly that with the built-in effects. To run
// the worker inside a service of your own instead, use package exactly.
package worker

import "github.com/exactlyonce/exactly/internal/cli"

// Version is set at build time with
// -ldflags "-X github.com/exactlyonce/exactly/worker.Version=...".
var Version = "dev"

// Exit codes of Main.
const (
	ExitOK     = cli.ExitOK
	ExitError  = cli.ExitError
	ExitConfig = cli.ExitConfig // bad configuration: fix the named setting
)

// Main runs the command line on args (without the program name) and
// returns the process exit code. It reads the process environment
// (WORKER_*, the AWS SDK's) and handles SIGINT and SIGTERM.
func Main(args []string) int {
	cli.Version = Version
	return cli.Main(args)
}
