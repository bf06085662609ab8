// Command bench measures the worker against the local emulators: throughput
// as a share of the limit the emulators set in the same run, requests per
// message by operation, send-to-effect latency, scaling with worker
// processes, next to a plain SDK baseline consumer. Run it through
// scripts/with-stack (make bench does); -report rewrites docs/BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/exactlyonce/exactly/tools/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}
