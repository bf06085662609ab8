// Command worker is the worker the chaos harness runs (see cmd/chaos): the
// real worker, plus the chaos-ledger effect. It calls the command line
// directly, not worker.Main, because its effect reads the built-in ledger's
// flags, which only the command line's own Env carries.
package main

import (
	"os"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/tools/internal/chaos"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Effects{chaos.EffectName: chaos.NewSleepyLedger}))
}
