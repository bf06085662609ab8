// Command plants reruns the simulation's planted bugs
// (internal/sim/testdata/plants): each applied to a throwaway worktree of
// HEAD, the simulation run until it is red, its red seeds replayed. See
// tools/internal/plants; `make plants` runs it.
package main

import (
	"os"

	"github.com/exactlyonce/exactly/tools/internal/plants"
)

func main() { os.Exit(plants.Main(os.Args[1:], os.Stdout, os.Stderr)) }
