// Package plants reruns the simulation's planted bugs: each patch in
// internal/sim/testdata/plants is applied to a throwaway worktree of HEAD,
// the simulation runs on it until it is red (or its budget ends), and up to
// -replays of its red seeds are replayed from their recordings. A plant
// that the simulation no longer finds, one that no longer applies or
// builds, and a red seed that does not replay are reported, and make the
// run fail. `make plants` runs it; docs/TESTING.md says how to add one.
package plants

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/tools/internal/bench"
)

// The CI budget of make sim (mk/sim.mk: SIM_SEEDS_DEFAULT, CHAIN_SEEDS):
// a plant is found when it is red within it.
const (
	defaultSeeds      = 14000
	defaultChainSeeds = 0
)

// Plant is one patch file: its header and where it is.
type Plant struct {
	ID         string
	What       string // the bug, in a sentence
	Where      string // file: function
	Expect     string // a substring of a red seed's report: its class, or a violation
	Seeds      int    // TestSim seeds to search from 1
	ChainSeeds int    // TestChain seeds to search from 1
	Args       []string
	Missed     string // set when the simulation is known not to find it: why
	Note       string // what a reader of the header should know (not used)
	Path       string
}

// ParsePlant reads a plant's header: "key: value" lines up to the first
// "diff --git" (git apply ignores them).
func ParsePlant(path string, r io.Reader) (Plant, error) {
	p := Plant{Path: path, Seeds: defaultSeeds, ChainSeeds: defaultChainSeeds}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	diff := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "diff --git ") {
			diff = true
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return p, fmt.Errorf("%s: header line %q is not key: value", path, line)
		}
		v = strings.TrimSpace(v)
		var err error
		switch strings.TrimSpace(k) {
		case "id":
			p.ID = v
		case "plant":
			p.What = v
		case "where":
			p.Where = v
		case "expect":
			p.Expect = v
		case "seeds":
			p.Seeds, err = strconv.Atoi(v)
		case "chainseeds":
			p.ChainSeeds, err = strconv.Atoi(v)
		case "args":
			p.Args = strings.Fields(v)
		case "missed":
			p.Missed = v
		case "note":
			p.Note = v
		default:
			return p, fmt.Errorf("%s: unknown header key %q (id, plant, where, expect, seeds, chainseeds, args, missed, note)", path, k)
		}
		if err != nil {
			return p, fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	switch {
	case !diff:
		return p, fmt.Errorf("%s: no diff after the header", path)
	case p.ID == "" || p.Expect == "":
		return p, fmt.Errorf("%s: the header needs id and expect", path)
	case p.Seeds+p.ChainSeeds == 0:
		return p, fmt.Errorf("%s: seeds and chainseeds are both 0", path)
	}
	return p, nil
}

// Red is one red seed of a run, as the simulation printed it.
type Red struct {
	Chain     bool // TestChain's, not TestSim's
	Seed      uint64
	After     time.Duration // from the start of its test to the seed found red
	Report    string        // its block of the output: classes, violations
	Recording string        // its recording's path, if written
}

var (
	simRed    = regexp.MustCompile(`\bseed (\d+)@\S* RED \(.*found (\S+) after the start`)
	chainRed  = regexp.MustCompile(`\bchain seed (\d+) RED after (\S+) wall since the start`)
	recording = regexp.MustCompile(`recording: (\S+\.rec) \(`)
)

// ParseOutput finds the red seeds in a `go test -v` run of TestSim and
// TestChain, in the order they were printed.
func ParseOutput(out string) []Red {
	var reds []Red
	for line := range strings.SplitSeq(out, "\n") {
		if m := simRed.FindStringSubmatch(line); m != nil {
			reds = append(reds, red(false, m[1], m[2]))
			continue
		}
		if m := chainRed.FindStringSubmatch(line); m != nil {
			reds = append(reds, red(true, m[1], m[2]))
			continue
		}
		if len(reds) == 0 {
			continue
		}
		r := &reds[len(reds)-1]
		if m := recording.FindStringSubmatch(line); m != nil && r.Recording == "" {
			r.Recording = m[1]
		}
		r.Report += strings.TrimSpace(line) + "\n"
	}
	return reds
}

func red(chain bool, seed, after string) Red {
	s, _ := strconv.ParseUint(seed, 10, 64)
	d, _ := time.ParseDuration(after)
	return Red{Chain: chain, Seed: s, After: d}
}

// Outcome is what a plant's run came to.
type Outcome struct {
	Plant    Plant
	Problem  string // why it failed the run: "" when it is as expected
	Reds     []Red
	Matching int // reds whose report has Expect
	First    *Red
	Replays  int // recordings replayed
	RedAgain int // of them, red again
	Exact    int // of them, replayed exactly
	Diverged []string
	Load     string // /proc/loadavg at the start
	Wall     time.Duration
}

// Main runs the plants the arguments name (all of them with none) and
// returns the process's exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the repository: plants are applied to a worktree of its HEAD")
	dir := fs.String("dir", "internal/sim/testdata/plants", "where the plants are, under root")
	stop := fs.Int("stopafter", 3, "end a plant's run once this many seeds are red")
	replays := fs.Int("replays", 3, "replay up to this many of a plant's red seeds from their recordings")
	report := fs.String("report", "plants-report.md", "write the table here, under root ('' for none)")
	list := fs.Bool("list", false, "list the plants and exit")
	goBin := fs.String("go", "go", "the go command")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: plants [flags] [ID ...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	all, err := load(filepath.Join(*root, *dir))
	if err != nil {
		fmt.Fprintln(stderr, "plants:", err)
		return 2
	}
	chosen, err := choose(all, fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "plants:", err)
		return 2
	}
	if *list {
		for _, p := range chosen {
			fmt.Fprintf(stdout, "%-20s %s (%s)\n", p.ID, p.What, p.Where)
		}
		return 0
	}
	head, err := git(*root, "rev-parse", "--short", "HEAD")
	if err != nil {
		fmt.Fprintln(stderr, "plants:", err)
		return 2
	}
	r := runner{root: *root, goBin: *goBin, head: head, stop: *stop, replays: *replays, log: stderr}
	var outs []Outcome
	failed := 0
	for i, p := range chosen {
		fmt.Fprintf(stderr, "plants: %d of %d: %s: %s\n", i+1, len(chosen), p.ID, p.What)
		o := r.run(context.Background(), p)
		outs = append(outs, o)
		fmt.Fprintln(stdout, o.Line())
		if o.Problem != "" {
			failed++
		}
	}
	table := Table(head, outs)
	if *report != "" {
		path := filepath.Join(*root, *report)
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			fmt.Fprintln(stderr, "plants:", err)
			return 1
		}
		fmt.Fprintf(stderr, "plants: the table is in %s\n", path)
	}
	fmt.Fprintf(stdout, "%d plants on %s: %d as expected, %d not\n", len(outs), head, len(outs)-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func load(dir string) ([]Plant, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no plants (*.patch) in %s", dir)
	}
	sort.Strings(files)
	var ps []Plant
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := ParsePlant(f, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".patch"); p.ID != want {
			return nil, fmt.Errorf("%s: id %q: name the file %s.patch", f, p.ID, p.ID)
		}
		if other, ok := seen[p.ID]; ok {
			return nil, fmt.Errorf("%s: id %s is %s's too", f, p.ID, other)
		}
		seen[p.ID] = f
		ps = append(ps, p)
	}
	return ps, nil
}

func choose(all []Plant, ids []string) ([]Plant, error) {
	if len(ids) == 0 {
		return all, nil
	}
	byID := map[string]Plant{}
	for _, p := range all {
		byID[p.ID] = p
	}
	var out []Plant
	for _, id := range ids {
		p, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("no plant %q (plants -list names them)", id)
		}
		out = append(out, p)
	}
	return out, nil
}

type runner struct {
	root, goBin, head string
	stop, replays     int
	log               io.Writer
}

func (r runner) run(ctx context.Context, p Plant) (o Outcome) {
	o.Plant = p
	o.Load = bench.LoadAvg()
	start := time.Now()
	defer func() { o.Wall = time.Since(start) }()
	tmp, err := os.MkdirTemp("", "plant-"+p.ID+"-")
	if err != nil {
		o.Problem = err.Error()
		return o
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	wt := filepath.Join(tmp, "wt")
	if _, err := git(r.root, "worktree", "add", "--detach", "--quiet", wt, "HEAD"); err != nil {
		o.Problem = "worktree: " + err.Error()
		return o
	}
	defer func() {
		if _, err := git(r.root, "worktree", "remove", "--force", wt); err != nil {
			fmt.Fprintf(r.log, "plants: %s: %v\n", p.ID, err)
		}
	}()
	patch, err := filepath.Abs(p.Path)
	if err != nil {
		o.Problem = err.Error()
		return o
	}
	if _, err := git(wt, "apply", patch); err != nil {
		o.Problem = "does not apply to HEAD: " + firstLine(err.Error())
		return o
	}
	out, err := r.goTest(ctx, wt, filepath.Join(tmp, "sim.out"), p, r.simArgs(p, filepath.Join(tmp, "red"))...)
	o.Reds = ParseOutput(out)
	if len(o.Reds) == 0 && err != nil && !strings.Contains(out, "\nok ") && !strings.Contains(out, "--- FAIL") {
		o.Problem = "the simulation did not run: " + lastLines(out, 3)
		return o
	}
	for i := range o.Reds {
		if strings.Contains(o.Reds[i].Report, p.Expect) {
			o.Matching++
			if o.First == nil {
				o.First = &o.Reds[i]
			}
		}
	}
	for i := range o.Reds {
		if o.Replays == r.replays {
			break
		}
		rd := o.Reds[i]
		if rd.Recording == "" {
			continue
		}
		o.Replays++
		again, exact, why := r.replay(ctx, wt, tmp, p, rd)
		if again {
			o.RedAgain++
		}
		if exact {
			o.Exact++
		} else {
			o.Diverged = append(o.Diverged, fmt.Sprintf("%s: %s", name(rd), why))
		}
	}
	switch {
	case p.Missed != "" && o.Matching > 0:
		o.Problem = "found, and its header says missed: drop the missed line"
	case p.Missed != "":
	case len(o.Reds) == 0:
		o.Problem = fmt.Sprintf("not found in %d seeds and %d chain seeds", p.Seeds, p.ChainSeeds)
	case o.Matching == 0:
		o.Problem = fmt.Sprintf("red, but no red seed's report has %q (first: %s)", p.Expect, gist(o.Reds[0].Report))
	case o.Replays > 0 && (o.RedAgain < o.Replays || o.Exact < o.Replays):
		o.Problem = fmt.Sprintf("replays: %d of %d red again, %d exact", o.RedAgain, o.Replays, o.Exact)
	}
	return o
}

func (r runner) simArgs(p Plant, record string) []string {
	a := []string{
		"-run", "^(TestSim|TestChain)$", "./internal/sim", "-args",
		"-sim.commit=" + r.head + "+" + p.ID,
		"-sim.seeds=" + strconv.Itoa(p.Seeds), "-sim.chainseeds=" + strconv.Itoa(p.ChainSeeds),
		"-sim.shrink=0", "-sim.stopafter=" + strconv.Itoa(r.stop), "-sim.record=" + record,
	}
	return append(a, p.Args...)
}

// replay runs a red seed again from its recording, on the same patched
// tree: red again, and exactly as recorded?
func (r runner) replay(ctx context.Context, wt, tmp string, p Plant, rd Red) (again, exact bool, why string) {
	test := "^TestSim$"
	if rd.Chain {
		test = "^TestChain$"
	}
	a := append([]string{"-run", test, "./internal/sim", "-args", "-sim.shrink=0", "-sim.replay=" + rd.Recording}, p.Args...)
	out, _ := r.goTest(ctx, wt, filepath.Join(tmp, fmt.Sprintf("replay-%d.out", rd.Seed)), p, a...)
	again = len(ParseOutput(out)) > 0
	exact = strings.Contains(out, "replayed the recording exactly")
	if !exact {
		why = "diverged"
		if i := strings.Index(out, "first decision that differs: "); i >= 0 {
			why = firstLine(out[i:])
		} else if i := strings.Index(out, "replay diverged"); i >= 0 {
			why = firstLine(out[i:])
		}
	}
	return again, exact, why
}

// goTest runs go test -v -count=1 in the worktree, keeps its output in
// file and returns it.
func (r runner) goTest(ctx context.Context, wt, file string, p Plant, args ...string) (string, error) {
	full := append([]string{"test", "-v", "-count=1", "-timeout", "60m"}, args...)
	cmd := exec.CommandContext(ctx, r.goBin, full...)
	cmd.Dir = wt
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if werr := os.WriteFile(file, b.Bytes(), 0o644); werr != nil {
		fmt.Fprintf(r.log, "plants: %s: %v\n", p.ID, werr)
	}
	return b.String(), err
}

// Line is the outcome in one line, for the terminal.
func (o Outcome) Line() string {
	verdict := "ok"
	if o.Problem != "" {
		verdict = "NOT AS EXPECTED: " + o.Problem
	} else if o.Plant.Missed != "" {
		verdict = "missed, as its header says: " + o.Plant.Missed
	}
	found := "no red seed"
	if o.First != nil {
		found = fmt.Sprintf("first %s after %s", name(*o.First), o.First.After)
	}
	return fmt.Sprintf("%-20s %s; %d red (%d with %q); replays %d/%d red again, %d exact; load %s; %s",
		o.Plant.ID, found, len(o.Reds), o.Matching, o.Plant.Expect, o.RedAgain, o.Replays, o.Exact, o.Load, verdict)
}

func name(r Red) string {
	if r.Chain {
		return fmt.Sprintf("chain seed %d", r.Seed)
	}
	return fmt.Sprintf("seed %d", r.Seed)
}

// Table is the outcomes as docs/TESTING.md's table of plants.
func Table(head string, outs []Outcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plants on %s (`make plants`: each patch applied to a worktree of HEAD, the simulation run until its first red seeds or the end of its budget, some of its red seeds replayed from their recordings).\n\n", head)
	b.WriteString("| plant | where | first red seed (time to it) | class or violation expected | red seeds seen | replays: red again, exact | load | verdict |\n")
	b.WriteString("|---|---|---|---|---:|---|---|---|\n")
	ex, again, total := 0, 0, 0
	for _, o := range outs {
		first := "none"
		if o.First != nil {
			first = fmt.Sprintf("%s (%s)", name(*o.First), o.First.After)
		}
		verdict := "found"
		switch {
		case o.Problem != "":
			verdict = "**" + o.Problem + "**"
		case o.Plant.Missed != "":
			verdict = "missed: " + o.Plant.Missed
		}
		fmt.Fprintf(&b, "| %s: %s | %s | %s | %s | %d | %d and %d of %d | %s | %s |\n",
			o.Plant.ID, o.Plant.What, o.Plant.Where, first, o.Plant.Expect, len(o.Reds), o.RedAgain, o.Exact, o.Replays, o.Load, verdict)
		ex += o.Exact
		again += o.RedAgain
		total += o.Replays
	}
	fmt.Fprintf(&b, "\nReplayed: %d red seeds, %d red again on the first replay, %d replayed exactly.\n", total, again, ex)
	for _, o := range outs {
		for _, d := range o.Diverged {
			fmt.Fprintf(&b, "- %s, %s\n", o.Plant.ID, d)
		}
	}
	return b.String()
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// gist is what a red seed's report says it broke: its classes line
// (TestSim), or else its first violation (TestChain), or else its first
// line.
func gist(report string) string {
	lines := strings.Split(report, "\n")
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "classes:") {
			return l
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "violations:" && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	return firstLine(report)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}
