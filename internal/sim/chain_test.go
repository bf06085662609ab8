package sim

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var flagChainSeeds = flag.Int("sim.chainseeds", 8, "TestChain: how many seeds of the end-to-end chain to run (from sim.first; sim.seed runs one)")

// runChainSeed runs the chain once in its own synctest bubble.
func runChainSeed(t *testing.T, cfg Config) (res Result) {
	synctest.Test(t, func(t *testing.T) {
		res = RunChain(cfg)
		time.Sleep(time.Minute) // long polls left behind end
	})
	return res
}

// TestChain runs the end-to-end chain (chain.go): producer, outbox, relays,
// two stages of workers, with seeded faults in every call.
func TestChain(t *testing.T) {
	kinds, ops, seeds := simFlags(t, *flagChainSeeds)
	var mu sync.Mutex
	stats := map[string]int{}
	red := 0
	start := time.Now()
	next := feed(seeds)
	t.Cleanup(func() {
		var names []string
		for k := range stats {
			names = append(names, k)
		}
		sort.Strings(names)
		var b strings.Builder
		fmt.Fprintf(&b, "chain: %d seeds, %d red, in %s\n", len(seeds), red, time.Since(start).Round(time.Second))
		for _, k := range names {
			fmt.Fprintf(&b, "  %-60s %d\n", k, stats[k])
		}
		t.Log(b.String())
	})
	for i := range min(runtime.GOMAXPROCS(0), len(seeds)) {
		t.Run(fmt.Sprintf("worker=%d", i), func(t *testing.T) {
			t.Parallel()
			for seed := range next {
				cfg := Config{Seed: seed, Rate: rate(), Kinds: kinds, Ops: ops, Logs: *flagLogs}
				rec := replaying(t, runChain, seed)
				if rec != nil {
					cfg.Want = rec.Steps
				}
				res := runChainSeed(t, cfg)
				if rec != nil {
					_, report := rec.compare(res)
					t.Log(report)
				}
				mu.Lock()
				for k, n := range res.Stats {
					stats[k] += n
				}
				if res.Failed() {
					red++
					reds.Add(1)
				}
				mu.Unlock()
				if res.Failed() {
					var b strings.Builder
					cmd := fmt.Sprintf("go test ./internal/sim -run '^TestChain$' -sim.seed=%d -v -sim.rate=%g", seed, rate())
					fmt.Fprintf(&b, "chain seed %d RED after %s wall since the start (%s virtual, %d faults)\nreplay: %s\n%sviolations:\n", seed, time.Since(start).Round(time.Millisecond), res.Virtual.Round(time.Second), len(res.Faults), cmd, recordRed(runChain, seed, cmd, res))
					for _, v := range first(res.Violations, 8) {
						fmt.Fprintf(&b, "  - %s\n", v)
					}
					b.WriteString("faults:\n")
					for _, f := range first(faultLines(res.Faults), 30) {
						fmt.Fprintf(&b, "  * %s\n", f)
					}
					if len(res.Logs) > 0 { // -sim.logs: the relays' lines
						b.WriteString("relay logs:\n")
						for _, l := range res.Logs {
							fmt.Fprintf(&b, "  %s\n", l)
						}
					}
					t.Error(b.String())
				}
			}
		})
	}
}

func faultLines(fs []Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}
