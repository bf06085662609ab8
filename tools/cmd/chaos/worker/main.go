// Command worker is the worker the chaos harness runs (see cmd/chaos): the
// real worker, plus the chaos-ledger effect, registered the way users add
// their own effects (docs/LIBRARY.md, "Your own effect").
package main

import (
	"os"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/tools/internal/chaos"
	"github.com/exactlyonce/exactly/worker"
)

func main() {
	effect.Register(chaos.EffectName, chaos.NewSleepyLedger)
	os.Exit(worker.Main(os.Args[1:]))
}
