// Command chaos tries hard to make the worker double an effect, lose a
// message or break a group's order, and exits non-zero if it does: several
// worker processes against the local stack, killed, frozen and stopped while
// a fault proxy resets connections, drops responses and answers with bursts
// of 5xx, throttling and TransactionConflict; the ledger effect must be
// exactly-once, the http effect (claim mode) may repeat a call only where a
// worker died or stalled between effect and commit. See internal/chaos;
// `make chaos` runs it against the local stack.
package main

import (
	"os"

	"github.com/exactlyonce/exactly/tools/internal/chaos"
)

func main() { os.Exit(chaos.Main(os.Args[1:], os.Stdout, os.Stderr)) }
