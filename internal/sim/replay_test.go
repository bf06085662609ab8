package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	flagReplaySeeds = flag.Int("sim.replayseeds", 0, "TestReplayMeasure: how many seeds (from sim.first) to run sim.replayruns times each, with and without faults, comparing their digests (0: skip)")
	flagReplayRuns  = flag.Int("sim.replayruns", 2, "TestReplayMeasure: runs per seed")
	flagReplaySteps = flag.Bool("sim.replaysteps", false, "TestReplayMeasure: log the sequencer's steps and show where two runs part")
	flagReplayDump  = flag.String("sim.replaydump", "", "TestReplayMeasure: write the steps and lines of two runs that part to this directory")
	flagReplayChain = flag.Bool("sim.replaychain", false, "TestReplayMeasure: run the chain (TestChain) instead of the world")
	flagSequence    = flag.Bool("sim.sequence", true, "order the calls that arrive together by the seed (sequencer.go); false: the Go runtime's order")
)

// TestReplayMeasure measures how many seeds replay exactly: each seed runs
// sim.replayruns times, with the seed's faults and without any, and the
// runs' digests (Result.Digest: faults, statistics, every message's story)
// are compared.
func TestReplayMeasure(t *testing.T) {
	if *flagReplaySeeds == 0 {
		t.Skip("-sim.replayseeds=N measures replays")
	}
	kinds, ops, _ := simFlags(t, 0)
	run := runSeed
	if *flagReplayChain {
		run = runChainSeed
	}
	type job struct {
		seed   uint64
		faults bool
	}
	next := make(chan job)
	go func() {
		defer close(next)
		for i := range *flagReplaySeeds {
			for _, f := range []bool{false, true} {
				next <- job{*flagFirst + uint64(i), f}
			}
		}
	}()
	var mu sync.Mutex
	same := map[bool]int{}
	var diffs []string
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for i := range runtime.GOMAXPROCS(0) {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				for j := range next {
					cfg := Config{Seed: j.seed, Rate: rate(), Kinds: kinds, Ops: ops, Workers: *flagWorkers, Lambdas: *flagLambdas, Swarm: *flagSwarm, Unsequenced: !*flagSequence, Logs: *flagLogs}
					if !j.faults {
						cfg.Ops, cfg.FixedOps = map[string]bool{}, true
					}
					cfg.LogSteps = *flagReplaySteps
					first := run(t, cfg)
					ok, diff := true, ""
					for range *flagReplayRuns - 1 {
						r := run(t, cfg)
						if r.Digest() != first.Digest() {
							ok, diff = false, firstDiff(first, r)+stepDiff(first.Steps, r.Steps)
							if *flagReplayDump != "" {
								for i, x := range []Result{first, r} {
									_ = os.WriteFile(fmt.Sprintf("%s/%d-%v-%d.steps", *flagReplayDump, j.seed, j.faults, i), []byte(strings.Join(x.Steps, "\n")+"\n"+strings.Join(x.lines(), "\n")), 0o644)
								}
							}
							break
						}
					}
					mu.Lock()
					if ok {
						same[j.faults]++
					} else {
						diffs = append(diffs, fmt.Sprintf("seed %d faults=%v: %s", j.seed, j.faults, diff))
					}
					mu.Unlock()
				}
			})
		}
	})
	n := *flagReplaySeeds
	t.Logf("replays exact (%d runs each): without faults %d of %d, with faults %d of %d; %s wall", *flagReplayRuns, same[false], n, same[true], n, time.Since(start).Round(time.Second))
	for _, d := range diffs {
		t.Log(d)
	}
}

// stepDiff shows where two runs' steps part, with the steps before.
func stepDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			var sb strings.Builder
			fmt.Fprintf(&sb, "\n  steps part at step %d of %d/%d:\n", i, len(a), len(b))
			for j := max(0, i-4); j < i; j++ {
				fmt.Fprintf(&sb, "      %s\n", a[j])
			}
			for j := i; j < min(i+4, len(a), len(b)); j++ {
				fmt.Fprintf(&sb, "    - %s\n    + %s\n", a[j], b[j])
			}
			return sb.String()
		}
	}
	return ""
}
