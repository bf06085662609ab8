package sim

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	flagSeed    = flag.Uint64("sim.seed", 0, "run only this seed (0: sim.seeds seeds from sim.first)")
	flagSeeds   = flag.Int("sim.seeds", 8, "how many seeds to run")
	flagFirst   = flag.Uint64("sim.first", 1, "first seed of the budget")
	flagFaults  = flag.String("sim.faults", "", "fault kinds to inject, comma-separated (default all): "+strings.Join(kindNames[1:], ","))
	flagOps     = flag.String("sim.ops", "", "operations that get faults, comma-separated (default all): "+strings.Join(Ops, ","))
	flagRate    = flag.Float64("sim.rate", 0, "probability that a call gets a fault (0: drawn per seed with -sim.swarm, else 0.04)")
	flagSwarm   = flag.Bool("sim.swarm", true, "draw the world's shape from each seed (swarm testing: docs/TESTING.md); false: the one fixed world")
	flagWorkers = flag.Int("sim.workers", 3, "pool workers")
	flagLambdas = flag.Int("sim.lambdas", 2, "concurrent Lambda pollers of the event source mapping")
	flagShrink  = flag.Duration("sim.shrink", 45*time.Second, "wall time spent shrinking a failing seed's faults (0: no shrinking)")
	flagReport  = flag.String("sim.report", "", "also write the summary to this file")
	flagShrinkN = flag.Int("sim.shrinkmax", 3, "shrink at most this many red seeds (the first found)")
	flagRepeat  = flag.Int("sim.repeat", 1, "runs per seed: a seed is red when any run is (the sequencer orders the calls that arrive together, but not every goroutine of a process: a rare replay goes another way, docs/TESTING.md)")
	flagDigest  = flag.String("sim.digest", "", "with sim.seed: the digest a red seed's report printed; the replay says whether its run matched it (replayed exactly)")
	flagVerbose = flag.Bool("sim.verbose", false, "log every seed, green ones too")
	flagStop    = flag.Int("sim.stopafter", 0, "stop taking new seeds once this many are red, in TestSim and TestChain together (0: run every seed; make plants uses it)")
	flagLogs    = flag.Bool("sim.logs", false, "keep every process's log lines (Debug and up) and print, for a red seed, those about the groups, keys and processes its violations name")
)

// classes name the kinds of violations, for the summary.
var classes = []struct{ name, match, also string }{
	// The outbox half (outboxworld.go).
	{"outbox: a message SQS refused for a reason its producer could not know marked failed and passed (the group must be held)", "messages failed that Write took", "outbox: relay"},
	{"outbox: a combined Write's messages not consecutive or not in its order", "not consecutive and in its order", "outbox: the Write of"},
	// Relay.GroupBatch (groupbatch.go).
	{"outbox group batch: a size limit refused a message and took a later one (runs not cut)", "outbox group batch: size break:", ""},
	{"outbox group batch: a break SQS's answers showed, not counted in Round.Reordered", "outbox group batch: break not counted:", ""},
	{"outbox group batch: held Reordered, and SQS had the group in order (false hold)", "outbox group batch: false hold:", ""},
	{"outbox group batch: a break never held (undetected)", "outbox group batch: undetected break:", ""},
	{"outbox: a group's message published before an earlier one", "outbox order:", ""},
	{"outbox: published though its write did not commit, or after it was dropped", "published, and its business write", ""},
	{"outbox: published after the operator dropped it", "published after the operator dropped it", ""},
	{"outbox: a failed SendMessageBatch not counted (Round.Errors; hole 1)", "counted no error", ""},
	{"outbox: a batch refused as too long neither split nor counted (hole 1)", "neither sent again in parts nor counted", ""},
	{"outbox: keys a BatchGetItem left unprocessed not asked for again", "left unprocessed were not asked for again", ""},
	// SQS's limits on attributes, ids and groups (sqslimits.go).
	{"outbox: Write took a message past SQS's attribute, id or group limits", "outbox: Write took", "past SQS's limits:"},
	{"outbox: a message received with other attributes or another group than written", "outbox: message ", "written in group"},
	{"outbox: a refused Write left items in its group", "outbox: end: group ", "whose Write was refused"},
	{"outbox: Write took a message over SQS's limit, or refused one at it", "outbox: Write ", ""},
	{"outbox: held wrongly, or not shown held", "outbox: group ", "held"},
	{"outbox: an operator's release, drop or listing broke its promise", "outbox: operator:", ""},
	// Operators of the workers' side (operators.go, opredrive.go).
	{"operator: Forget deleted a record other than the one its page showed (hole 1)", "operator: Forget of", ""},
	{"operator: Stuck listed a record whose lease had not ended", "operator: Stuck listed", ""},
	{"operator: a dry run listed a message twice, did not end, or moved (hole 7)", "operator: a dry run", ""},
	{"operator: a redrive by group broke its group's order or its report (hole 8)", "operator: a redrive of", ""},
	{"operator: Find said a message is not in the DLQ it is in, or named another key (hole 6)", "operator: Find of", ""},
	{"operator: other", "operator: ", ""},
	{"outbox: end: pending, or marked published and never sent", "outbox: end:", ""},
	{"belief: a lease believed longer than the ledger's (the record's lease_until under its token)", "belief: a lease believed longer", ""},
	{"belief: a lease counted on under a token the ledger never took", "which the ledger never took", ""},
	{"belief: a visibility believed longer than SQS's (its receipt's deadline)", "belief: a visibility believed longer", ""},
	{"fencing: a complete/extend/release took effect from a token that did not hold the record", "fencing: a ", " took effect, but the record"},
	{"fencing: a live lease taken over", "fencing: a live lease taken over", ""},
	{"expiry: a COMPLETED record claimed again before its TTL ended", "before its TTL (", ""},
	{"expiry: a record past its TTL (not swept yet) refused a claim", "expiry: a record past its TTL blocked", ""},
	{"expiry: a live lease outlives its record's expires_at", "expiry: a live lease outlives its record", ""},
	{"ttl: a conflict note took effect on a record that was not COMPLETED (swept or claimed again)", "ttl: a conflict note took effect", ""},
	{"DLQ: the product moved a message that does not fail permanently", "which never fails permanently now", ""},
	{"DLQ: the product moved a message without a permanent verdict in its delivery", "without a permanent verdict in its delivery", ""},
	{"read-dependent balance off: a stale read committed (lost update)", "read-dependent balance", ""},
	{"lost: a poison message's DLQ copy was redriven and never dead-lettered again", "redriven back to its queue", ""},
	{"pool started a delivery past SQS's visibility (hole 4)", "pool started a delivery past its visibility", ""},
	{"limits: a request past a DynamoDB limit reached DynamoDB, or a commit within them did not commit", "limits: ", ""},
	{"invalid commit retried or redelivered instead of dead-lettered (hole 6)", "invalid message: ", ""},
	{"lost: the DLQ copy was dropped (same MessageDeduplicationId in a DLQ of wider scope)", "dropped by the DLQ's deduplication", ""},
	{"order broken among messages redriven together", "order:", "dead-lettered: true"},
	{"order broken (never dead-lettered)", "order:", "dead-lettered: false"},
	{"a writes-only commit sent after the worker stopped holding its message", "commit not held:", ""},
	{"claim mode: downstream called again outside the documented window", "claim mode: downstream called", ""},
	{"transactional mode: applied twice", "transactional mode", ""},
	{"transactional balance off (see the lost or doubled messages)", "transactional balance", ""},
	{"lost: moved to the DLQ by the queue's redrive policy", "moved by the queue's redrive policy", ""},
	{"lost: other", "lost:", ""},
	{"key scope: a claim under no message's key (not its queue's dedup scope)", "key scope:", ""},
	{"deleted before its record committed", "before its record committed", ""},
	{"COMPLETED record reopened", "reopened", ""},
	{"not settled (stuck messages)", "not settled", ""},
	{"DLQ holds a message of no workload", "which is no message of the workload", ""},
	{"applied and left in the DLQ", "applied but still in", ""},
	{"tail: the redrive policy moved a message after the faults healed", "after the faults healed", ""},
	{"tail: a claim left IN_PROGRESS", "claim left behind", ""},
	// Last: a violation no class above names still shows in the summary.
	{"unclassified (name its class in sim_test.go's classes)", "", ""},
}

func classify(vs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		for _, c := range classes {
			if strings.Contains(v, c.match) && (c.also == "" || strings.Contains(v, c.also)) {
				if !seen[c.name] {
					seen[c.name] = true
					out = append(out, c.name)
				}
				break
			}
		}
	}
	return out
}

// replay is the one command that replays a seed with the current settings;
// digest, when known, lets the replay check that it ran the same run.
func replay(seed uint64, digest string) string {
	cmd := fmt.Sprintf("make sim SEED=%d", seed)
	if digest != "" {
		cmd += " DIGEST=" + digest
	}
	if *flagFaults != "" {
		cmd += " FAULTS=" + *flagFaults
	}
	if *flagOps != "" {
		cmd += " OPS=" + *flagOps
	}
	if *flagRate != 0 {
		cmd += fmt.Sprintf(" RATE=%g", *flagRate)
	}
	if a := nonDefault(); a != "" {
		cmd += " SIM_ARGS='" + a + "'"
	}
	return cmd
}

const defaultRate = 0.04

// rate is the -sim.rate flag, or the default when it is not given.
func rate() float64 {
	if *flagRate == 0 {
		return defaultRate
	}
	return *flagRate
}

// nonDefault lists the flags that change a run and are not set by the
// Makefile's own variables.
func nonDefault() string {
	var a []string
	if *flagWorkers != 3 {
		a = append(a, fmt.Sprintf("-sim.workers=%d", *flagWorkers))
	}
	if *flagLambdas != 2 {
		a = append(a, fmt.Sprintf("-sim.lambdas=%d", *flagLambdas))
	}
	if !*flagSwarm {
		a = append(a, "-sim.swarm=false")
	}
	if !*flagSequence {
		a = append(a, "-sim.sequence=false")
	}
	return strings.Join(a, " ")
}

// runRepeat runs cfg up to n times and returns the first failing result
// (or the last), and how many runs it took.
func runRepeat(t *testing.T, cfg Config, n int) (Result, int) {
	var res Result
	for i := 1; i <= max(n, 1); i++ {
		res = runSeed(t, cfg)
		if res.Failed() {
			return res, i
		}
	}
	return res, max(n, 1)
}

// runSeed runs one configuration in its own synctest bubble.
func runSeed(t *testing.T, cfg Config) (res Result) {
	synctest.Test(t, func(t *testing.T) {
		res = run(cfg)
		// Long polls a cancelled caller left behind go on, as on SQS,
		// until their wait ends.
		time.Sleep(time.Minute)
	})
	return res
}

type summary struct {
	mu      sync.Mutex
	shrunk  int
	found   map[string]*foundClass
	runs    int
	red     []string
	stats   map[string]int
	wall    time.Duration
	virtual time.Duration
}

// simFlags reads the -sim.* flags every simulation test shares: the fault
// kinds, the operations, and the seeds (sim.seed, or n from sim.first). It
// skips under -short unless a seed is given.
func simFlags(t *testing.T, n int) (map[Kind]bool, map[string]bool, []uint64) {
	t.Helper()
	if testing.Short() && *flagSeed == 0 {
		t.Skip("the simulation runs with `make sim` (or -sim.seed=N); -short skips it")
	}
	kinds, err := ParseKinds(*flagFaults)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps(*flagOps)
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{*flagSeed}
	if *flagSeed == 0 && *flagReplay != "" {
		rec, err := readRecording(*flagReplay)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{rec.Seed}
	} else if *flagSeed == 0 {
		seeds = nil
		for i := range n {
			seeds = append(seeds, *flagFirst+uint64(i))
		}
	}
	return kinds, ops, seeds
}

func TestSim(t *testing.T) {
	kinds, ops, seeds := simFlags(t, *flagSeeds)
	sum := &summary{stats: map[string]int{}, found: map[string]*foundClass{}}
	start := time.Now()
	t.Cleanup(func() { sum.print(t, start, kinds, ops) })
	// A few parallel workers take the seeds in turn: tens of thousands of
	// parallel subtests would cost more than the runs.
	next := feed(seeds)
	workers := min(runtime.GOMAXPROCS(0), len(seeds))
	for i := range workers {
		t.Run(fmt.Sprintf("worker=%d", i), func(t *testing.T) {
			t.Parallel()
			for seed := range next {
				simSeed(t, seed, kinds, ops, sum, start)
			}
		})
	}
}

// reds counts the red seeds of TestSim and TestChain together, for
// -sim.stopafter.
var reds atomic.Int64

// feed hands out seeds in order until they run out or -sim.stopafter red
// seeds have been seen. Its goroutine ends when the seeds do: every
// receiver ranges over the channel to its close.
func feed(seeds []uint64) <-chan uint64 {
	next := make(chan uint64)
	go func() {
		defer close(next)
		for _, s := range seeds {
			if *flagStop > 0 && reds.Load() >= int64(*flagStop) {
				return
			}
			next <- s
		}
	}()
	return next
}

func simSeed(t *testing.T, seed uint64, kinds map[Kind]bool, ops map[string]bool, sum *summary, start time.Time) {
	{
		{
			cfg := Config{Seed: seed, Rate: rate(), Kinds: kinds, Ops: ops, Workers: *flagWorkers, Lambdas: *flagLambdas,
				Swarm: *flagSwarm, FixedRate: *flagRate != 0, FixedKinds: *flagFaults != "", FixedOps: *flagOps != "", Unsequenced: !*flagSequence, Logs: *flagLogs}
			rec := replaying(t, runWorld, seed)
			if rec != nil {
				cfg.Want = rec.Steps
			}
			t0 := time.Now()
			res, runs := runRepeat(t, cfg, *flagRepeat)
			took := time.Since(t0)
			sum.add(res, took)
			if rec != nil {
				_, report := rec.compare(res)
				t.Log(report)
			} else if *flagSeed != 0 {
				checkDigest(t, seed, res)
			}
			if !res.Failed() {
				if !*flagVerbose {
					return
				}
				t.Logf("seed %d green: %d faults, %s virtual in %s", seed, len(res.Faults), res.Virtual.Round(time.Second), took.Round(time.Millisecond))
				return
			}
			reds.Add(1)
			var b strings.Builder
			fmt.Fprintf(&b, "seed %s RED (run %d of up to %d) after %s wall (%s virtual), %d faults injected, found %s after the start\n", seedAt(seed), runs, *flagRepeat, took.Round(time.Millisecond), res.Virtual.Round(time.Second), len(res.Faults), time.Since(start).Round(time.Millisecond))
			fmt.Fprintf(&b, "shape: %s\n", res.Shape)
			fmt.Fprintf(&b, "replay: %s\n   (or: go test ./internal/sim -run 'TestSim' -sim.seed=%d -sim.digest=%s -v%s)\n", replay(seed, res.Digest()), seed, res.Digest(), extraFlags())
			b.WriteString(recordRed(runWorld, seed, replay(seed, ""), res))
			b.WriteString("violations:\n")
			for _, v := range first(res.Violations, 6) {
				fmt.Fprintf(&b, "  - %s\n", v)
			}
			fmt.Fprintf(&b, "classes: %s\n", strings.Join(classify(res.Violations), "; "))
			if *flagLogs {
				lines := logsAbout(res.Logs, first(res.Violations, 6))
				fmt.Fprintf(&b, "log lines about the groups and keys named above (%d of %d):\n", len(lines), len(res.Logs))
				for _, l := range lines {
					fmt.Fprintf(&b, "  %s\n", l)
				}
			}
			sum.addClasses(seed, classify(res.Violations), time.Since(start))
			minimal := res.Faults
			if sum.shrinkSlot() {
				var mres Result
				var tries int
				minimal, mres, tries = shrink(t, cfg, res)
				fmt.Fprintf(&b, "smallest fault set that still fails (%d runs of shrinking): %d fault(s)\n", tries, len(minimal))
				for _, f := range minimal {
					fmt.Fprintf(&b, "  * %s\n", f)
				}
				b.WriteString("  its violations:\n")
				for _, v := range first(mres.Violations, 6) {
					fmt.Fprintf(&b, "    - %s\n", v)
				}
			} else {
				fmt.Fprintf(&b, "(not shrunk: the first %d red seeds were; replay this one to shrink it)\n", *flagShrinkN)
			}
			shrunk := ""
			if len(minimal) != len(res.Faults) || minimal == nil {
				shrunk = fmt.Sprintf(", shrunk to %d", len(minimal))
			}
			sum.addRed(fmt.Sprintf("seed %-14s %-70s faults %d%s: %s", seedAt(seed), strings.Join(classify(res.Violations), "; "), len(res.Faults), shrunk, replay(seed, res.Digest())))
			t.Error(b.String())
		}
	}
}

// logsAbout picks the log lines that mention a message group ("group=g5")
// or a dedup key ("sim#...") named in the violations, and every line of a
// process a violation names before its story ("w2.5 committed ...").
func logsAbout(logs, violations []string) []string {
	var marks []string
	procs := map[string]bool{}
	for _, v := range violations {
		for _, m := range groupRE.FindAllStringSubmatch(v, -1) {
			marks = append(marks, "group="+m[1]+" ")
		}
		marks = append(marks, keyRE.FindAllString(v, -1)...)
		head, _, _ := strings.Cut(v, "its story")
		for _, p := range procRE.FindAllString(head, -1) {
			procs[p] = true
		}
	}
	var out []string
	for _, l := range logs {
		if f := strings.Fields(l); len(f) > 1 && procs[f[1]] {
			out = append(out, l)
			continue
		}
		for _, m := range marks {
			if strings.Contains(l+" ", m) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

var (
	groupRE = regexp.MustCompile(`group ([A-Za-z0-9_-]+)`)
	keyRE   = regexp.MustCompile(`sim#[^ ,;)]+`)
	procRE  = regexp.MustCompile(`\bw[0-9]+\.[0-9]+\b`)
)

func extraFlags() string {
	s := ""
	if *flagFaults != "" {
		s += " -sim.faults=" + *flagFaults
	}
	if *flagOps != "" {
		s += " -sim.ops=" + *flagOps
	}
	if *flagRate != 0 {
		s += fmt.Sprintf(" -sim.rate=%g", *flagRate)
	}
	if a := nonDefault(); a != "" {
		s += " " + a
	}
	return s
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// shrink looks for a small subset of res's faults under which the run still
// fails: first none at all, then delta debugging (ddmin) on the fault IDs,
// within the -sim.shrink wall budget. The runs are replays with only the
// chosen faults allowed to fire, so the set found can only get smaller.
func shrink(t *testing.T, cfg Config, res Result) ([]Fault, Result, int) {
	if *flagShrink <= 0 {
		return res.Faults, res, 0
	}
	deadline := time.Now().Add(*flagShrink)
	tries := 0
	try := func(ids []string) (Result, bool) {
		tries++
		c := cfg
		c.Only = map[string]bool{}
		for _, id := range ids {
			c.Only[id] = true
		}
		r, _ := runRepeat(t, c, 4)
		return r, r.Failed()
	}
	if r, failed := try(nil); failed {
		return nil, r, tries
	}
	cur, curRes := ids(res.Faults), res
	n := 2
	for len(cur) >= 2 && time.Now().Before(deadline) {
		chunk := (len(cur) + n - 1) / n
		reduced := false
		for i := 0; i < len(cur) && time.Now().Before(deadline); i += chunk {
			sub := cur[i:min(i+chunk, len(cur))]
			if r, failed := try(sub); failed {
				cur, curRes, n, reduced = ids(r.Faults), r, 2, true
				break
			}
			comp := append(append([]string(nil), cur[:i]...), cur[min(i+chunk, len(cur)):]...)
			if n > 2 {
				if r, failed := try(comp); failed {
					cur, curRes, n, reduced = ids(r.Faults), r, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(cur) {
				break
			}
			n = min(2*n, len(cur))
		}
	}
	return curRes.Faults, curRes, tries
}

func ids(fs []Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

func (s *summary) add(r Result, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.wall += took
	s.virtual += r.Virtual
	for k, v := range r.Stats {
		s.stats[k] += v
	}
}

type foundClass struct {
	seeds     int
	firstSeed uint64
	after     time.Duration
}

func (s *summary) addClasses(seed uint64, cs []string, after time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		f := s.found[c]
		if f == nil {
			f = &foundClass{firstSeed: seed, after: after}
			s.found[c] = f
		}
		f.seeds++
		if seed < f.firstSeed {
			f.firstSeed = seed
		}
		if after < f.after {
			f.after = after
		}
	}
}

func (s *summary) shrinkSlot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shrunk >= *flagShrinkN {
		return false
	}
	s.shrunk++
	return true
}

func (s *summary) addRed(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.red = append(s.red, line)
}

func (s *summary) print(t *testing.T, start time.Time, kinds map[Kind]bool, ops map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\n==== simulation: %d runs, %d red, %s wall (%s virtual simulated) ====\n", s.runs, len(s.red), time.Since(start).Round(time.Millisecond), s.virtual.Round(time.Second))
	var ks []string
	for k := range kinds {
		ks = append(ks, k.String())
	}
	sort.Strings(ks)
	var opNames []string
	for o := range ops {
		opNames = append(opNames, o)
	}
	sort.Strings(opNames)
	rates := fmt.Sprintf("%.3f per call", rate())
	if *flagSwarm {
		rates = "drawn per seed (see shape:)"
		if *flagRate != 0 {
			rates = fmt.Sprintf("%.3f per call", rate())
		}
	}
	fmt.Fprintf(&b, "fault kinds: %s%s\noperations:  %s\nrate:        %s\n", strings.Join(ks, ","), map[bool]string{true: " (each seed enables a subset: see shape:)"}[*flagSwarm && *flagFaults == ""], strings.Join(opNames, ","), rates)
	names := make([]string, 0, len(s.stats))
	for k := range s.stats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, sect := range []string{"shape:", "fault:", "process:", "workload:", "pool:", "lambda:", "redrive:", "tail:", "window:", "path:", "fence:", "dlq:", "world:", "end:", "dynamo:", "sim:", "downstream", "outbox", "limits:", "log:"} {
		for _, k := range names {
			if strings.HasPrefix(k, sect) {
				fmt.Fprintf(&b, "  %-72s %8d\n", k, s.stats[k])
			}
		}
	}
	if len(s.found) > 0 {
		b.WriteString("violations found (class: red seeds, lowest seed, wall time to the first):\n")
		for _, c := range classes {
			if f := s.found[c.name]; f != nil {
				fmt.Fprintf(&b, "  %-84s %4d  seed %-6d %s\n", c.name, f.seeds, f.firstSeed, f.after.Round(time.Millisecond))
			}
		}
	}
	if len(s.red) > 0 {
		sort.Strings(s.red)
		b.WriteString("red seeds:\n")
		for _, r := range s.red {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	var out io.Writer = os.Stdout
	fmt.Fprint(out, b.String())
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, []byte(b.String()), 0o644); err != nil {
			t.Log(err)
		}
	}
}

// The injector's decisions depend on the seed and the call's identity only.
func TestInjectorIsAFunctionOfSeedAndCall(t *testing.T) {
	all, _ := ParseKinds("")
	ops, _ := ParseOps("")
	a := newInjector(7, 0.5, all, ops, nil)
	b := newInjector(7, 0.5, all, ops, nil)
	var ka, kb []Kind
	for i := range 200 {
		k, _ := a.decide("PutItem", fmt.Sprint("key", i), "w0")
		ka = append(ka, k)
	}
	// Another order of the same calls, from other processes.
	kb = make([]Kind, 200)
	for i := 199; i >= 0; i-- {
		k, _ := b.decide("PutItem", fmt.Sprint("key", i), "w9")
		kb[i] = k
	}
	for i := range ka {
		if ka[i] != kb[i] {
			t.Fatalf("call %d: %s then %s", i, ka[i], kb[i])
		}
	}
	c := newInjector(8, 0.5, all, ops, nil)
	same := 0
	for i := range 200 {
		k, _ := c.decide("PutItem", fmt.Sprint("key", i), "w0")
		if k == ka[i] {
			same++
		}
	}
	if same == 200 {
		t.Fatal("another seed made the same decisions")
	}
}

func TestInjectorRestrictions(t *testing.T) {
	kinds, err := ParseKinds("lost,partial")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps("DeleteMessageBatch")
	if err != nil {
		t.Fatal(err)
	}
	in := newInjector(1, 1, kinds, ops, nil)
	for i := range 50 {
		if k, _ := in.decide("PutItem", fmt.Sprint(i), "w"); k != None {
			t.Fatalf("PutItem got %s", k)
		}
		if k, _ := in.decide("DeleteMessageBatch", fmt.Sprint(i), "w"); k != Lost && k != Partial {
			t.Fatalf("DeleteMessageBatch got %s", k)
		}
	}
	if _, err := ParseKinds("nope"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	only := newInjector(1, 1, kinds, ops, map[string]bool{"DeleteMessageBatch|x|2": true})
	k1, _ := only.decide("DeleteMessageBatch", "x", "w")
	k2, _ := only.decide("DeleteMessageBatch", "x", "w")
	if k1 != None || k2 == None {
		t.Fatalf("only: %s %s", k1, k2)
	}
}

// checkDigest tells a replay (sim.seed) whether its run is the one whose
// digest the red seed's report printed (sim.digest): the sequencer makes
// nearly every seed replay exactly, and says so when one does not.
func checkDigest(t *testing.T, seed uint64, res Result) {
	t.Helper()
	switch d := res.Digest(); {
	case *flagDigest == "":
		t.Logf("seed %d: digest %s (faults, statistics and every message's story)", seed, d)
	case d == *flagDigest:
		t.Logf("seed %d replayed exactly: digest %s", seed, d)
	default:
		t.Logf("seed %d replayed differently: digest %s, the reported run's %s (a divergence nothing orders yet: docs/TESTING.md, \"What a seed fixes\", says how to find it); REPEAT=20 runs it again until a run is red", seed, d, *flagDigest)
	}
}

// TestEveryViolationIsClassified: a violation no class names is still
// counted in the summary (the last class), never left out of it.
func TestEveryViolationIsClassified(t *testing.T) {
	got := classify([]string{"+1m2s something no class names yet"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "unclassified") {
		t.Fatalf("classify of an unnamed violation = %q, want the unclassified class", got)
	}
	got = classify([]string{"+5m ttl: a conflict note took effect on a record that was not COMPLETED: w1's note on k found it absent"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "ttl: a conflict note") {
		t.Fatalf("classify of a note's violation = %q", got)
	}
	got = classify([]string{"+2m outbox: relay r1 read group g2 by Query while keys of it a BatchGetItem left unprocessed were not asked for again (UnprocessedKeys dropped)"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "outbox: keys a BatchGetItem left unprocessed") {
		t.Fatalf("classify of the relay's unread keys = %q", got)
	}
	for line, class := range map[string]string{
		"+1m outbox: relay r2 marked 2 messages failed that Write took (SQS refused them for a reason their producer could not know: the group must be held)": "outbox: a message SQS refused",
		"+1m outbox: the Write of w1 (messages [a b] of group g1) committed at sequence numbers [3 5]: not consecutive and in its order":                      "outbox: a combined Write's messages",
	} {
		if got := classify([]string{line}); len(got) != 1 || !strings.HasPrefix(got[0], class) {
			t.Errorf("classify(%q) = %q, want %q", line, got, class)
		}
	}
}
