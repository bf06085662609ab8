// Package cli is the worker's command line: run (ECS and any long-running
// host), lambda, setup, send, redrive, healthcheck and version. It is a
// client of the library (package exactly): flags and WORKER_* variables in,
// an exactly.Config out. Package worker is its public door for binaries
// with effects of their own.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/exactlyonce/exactly/internal/config"
)

// Version is the build version, which package worker sets from its own
// (stamped at build time) before it calls Main.
var Version = "dev"

// Exit codes.
const (
	ExitOK     = 0
	ExitError  = 1
	ExitConfig = 2 // bad configuration: fix the named setting
)

const usage = `worker: exactly-once effects on SQS

usage: worker <command> [flags]

commands:
  run       long-poll queues and apply effects exactly once (ECS, any host)
  lambda    serve SQS events from a Lambda event source mapping (the default
            when AWS_LAMBDA_RUNTIME_API is set and no command is given)
  relay     publish the outbox table's messages to their queues, in order per
            group (ECS, any host; on Lambda, the handler of the table's stream)
  outbox    list the outbox's pending messages, or a group's recent ones;
            outbox release / outbox drop: decide on a group the relay holds
            at a message SQS refused (see worker outbox release --help)
  setup     create queues and tables that are missing (local stacks, first tries)
  send      send messages to a queue
  redrive   move messages from a dead-letter queue back to their queue,
            keeping group, attributes and dedup key
  ledger    print the balances of the ledger demo effect
  inspect   show a dedup record, by key or by queue and message id, dedup id
            or idempotency-key (the key scoped as the worker scopes it)
  stuck     list IN_PROGRESS records whose lease has ended, oldest first
  forget    delete one dedup record deliberately (--yes); its message's next
            delivery runs the effect again. Needs dynamodb:DeleteItem, which
            the worker's own role never has
  console   serve the operator console: queues, records, dead letters and
            the outbox in a browser (read-only unless --write; loopback
            only unless --auth-file)
  healthcheck
            ask the running worker's /healthz (exit 0 when healthy): the
            container health check, as the image has no shell or curl
  version   print the build version

Run 'worker <command> --help' for the command's flags. Every flag has a
WORKER_* environment twin; a flag on the command line wins.
`

// Main runs the command line and returns the process exit code.
func Main(args []string, own Effects) int {
	effects, err := withBuiltins(own)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		return ExitConfig
	}
	return run(effects, args, os.Stdout, os.Stderr, os.LookupEnv)
}

func run(effects Effects, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	if len(args) == 0 {
		// On Lambda, the binary is the bootstrap: it starts with no
		// arguments, and WORKER_COMMAND (default lambda) says which
		// handler the function is.
		if api, _ := lookup("AWS_LAMBDA_RUNTIME_API"); api != "" {
			cmd, _ := lookup("WORKER_COMMAND")
			switch cmd {
			case "":
				cmd = "lambda"
			case "lambda", "relay":
			default:
				fmt.Fprintf(stderr, "worker: WORKER_COMMAND %q: on Lambda, want lambda (the SQS consumer) or relay (the outbox relay)\n", cmd)
				return ExitConfig
			}
			args = []string{cmd}
		} else {
			fmt.Fprint(stderr, usage)
			return ExitConfig
		}
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		err = withSignals(func(ctx context.Context, force <-chan struct{}) error {
			return runCommand(ctx, force, effects, rest, stdout, stderr, lookup)
		})
	case "lambda":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return lambdaCommand(ctx, effects, rest, stdout, stderr, lookup)
		})
	case "relay":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return relayCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "outbox":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return outboxCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "setup":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return setupCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "send":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return sendCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "redrive":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return redriveCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "ledger":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return ledgerCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "inspect":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return inspectCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "stuck":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return stuckCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "forget":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return forgetCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "console":
		err = withSignals(func(ctx context.Context, _ <-chan struct{}) error {
			return consoleCommand(ctx, rest, stdout, stderr, lookup)
		})
	case "healthcheck":
		err = healthcheckCommand(context.Background(), rest, stdout, stderr, lookup)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "worker", Version)
		return ExitOK
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n%s", cmd, usage)
		return ExitConfig
	}
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	var cerr *config.Error
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &cerr):
		fmt.Fprintln(stderr, "worker: "+cerr.Msg)
		return ExitConfig
	default:
		fmt.Fprintln(stderr, "worker: "+err.Error())
		return ExitError
	}
}

// withSignals runs f with a context cancelled by the first SIGINT/SIGTERM and
// a channel closed by the second.
func withSignals(f func(ctx context.Context, force <-chan struct{}) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	force := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(force)
		case <-done:
		}
	}()
	return f(ctx, force)
}
