package plants

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePlant(t *testing.T) {
	src := "id: F9\nplant: a bug\nwhere: a.go: f\nexpect: fencing: x\nchainseeds: 300\nseeds: 0\nargs: -sim.faults=lost -sim.rate=0.1\nmissed: not yet\n\ndiff --git a/a.go b/a.go\n"
	p, err := ParsePlant("F9.patch", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != "F9" || p.What != "a bug" || p.Where != "a.go: f" || p.Expect != "fencing: x" || p.Seeds != 0 || p.ChainSeeds != 300 || p.Missed != "not yet" || len(p.Args) != 2 {
		t.Errorf("parsed %+v", p)
	}
	p, err = ParsePlant("F8.patch", strings.NewReader("id: F8\nexpect: lost\n\ndiff --git a/a b/a\n"))
	if err != nil || p.Seeds != defaultSeeds || p.ChainSeeds != defaultChainSeeds {
		t.Errorf("defaults: %+v, %v", p, err)
	}
	for name, bad := range map[string]string{
		"no diff":     "id: F1\nexpect: x\n",
		"no expect":   "id: F1\n\ndiff --git a/a b/a\n",
		"unknown key": "id: F1\nexpect: x\nseed: 3\n\ndiff --git a/a b/a\n",
		"not a pair":  "id F1\n\ndiff --git a/a b/a\n",
		"no seeds":    "id: F1\nexpect: x\nseeds: 0\n\ndiff --git a/a b/a\n",
		"bad number":  "id: F1\nexpect: x\nseeds: many\n\ndiff --git a/a b/a\n",
	} {
		if _, err := ParsePlant("F1.patch", strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}

// TestParseOutput reads red seeds from output the simulation printed
// (testdata/sim-output.txt: a TestSim red seed of the F1 plant, and a chain
// seed's block in TestChain's format).
func TestParseOutput(t *testing.T) {
	b, err := os.ReadFile("testdata/sim-output.txt")
	if err != nil {
		t.Fatal(err)
	}
	reds := ParseOutput(string(b))
	if len(reds) != 2 {
		t.Fatalf("%d red seeds, want 2: %+v", len(reds), reds)
	}
	s, c := reds[0], reds[1]
	if s.Chain || s.Seed != 2 || s.After != 90*time.Millisecond || s.Recording != "/tmp/f1red/seed-2.rec" ||
		!strings.Contains(s.Report, "classes: fencing: a complete/extend/release took effect") || strings.Contains(s.Report, "deposit d3") {
		t.Errorf("TestSim's red seed: %+v", s)
	}
	if !c.Chain || c.Seed != 7 || c.After != 2500*time.Millisecond || c.Recording != "/tmp/r/chain-seed-7.rec" || !strings.Contains(c.Report, "end: deposit d3 never applied") {
		t.Errorf("TestChain's red seed: %+v", c)
	}
	if g := gist(s.Report); g != "classes: fencing: a complete/extend/release took effect from a token that did not hold the record" {
		t.Errorf("a TestSim red seed's gist is its classes line, got %q", g)
	}
	if g := gist(c.Report); g != "- end: deposit d3 never applied" {
		t.Errorf("a chain red seed's gist: %q", g)
	}
	if got := ParseOutput("=== RUN TestSim\n--- PASS: TestSim\nok\n"); len(got) != 0 {
		t.Errorf("a green run: %+v", got)
	}
}

func TestTableSaysWhatWasNotAsExpected(t *testing.T) {
	first := Red{Seed: 4, After: time.Second}
	outs := []Outcome{
		{Plant: Plant{ID: "A", What: "a", Expect: "x"}, Reds: []Red{first}, Matching: 1, First: &first, Replays: 1, RedAgain: 1, Exact: 1},
		{Plant: Plant{ID: "B", What: "b", Expect: "y"}, Problem: "not found in 10 seeds and 0 chain seeds"},
		{Plant: Plant{ID: "C", What: "c", Expect: "z", Missed: "known"}, Replays: 1, Diverged: []string{"seed 9: step 3"}},
	}
	tab := Table("abc1234", outs)
	for _, want := range []string{"| A: a |", "seed 4 (1s)", "| found |", "**not found in 10 seeds and 0 chain seeds**", "missed: known", "Replayed: 2 red seeds, 1 red again on the first replay, 1 replayed exactly.", "- C, seed 9: step 3"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// TestKeptPlantsParse reads every plant kept in the repository: each has
// a header the tool can run, named by its file, and a diff that names only
// files of the repository.
func TestKeptPlantsParse(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "internal", "sim", "testdata", "plants")
	paths, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil || len(paths) < 40 {
		t.Fatalf("%d plants in %s (%v): the plants moved?", len(paths), dir, err)
	}
	ids := map[string]bool{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParsePlant(path, f)
		_ = f.Close()
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if want := strings.TrimSuffix(filepath.Base(path), ".patch"); p.ID != want || ids[p.ID] {
			t.Errorf("%s: id %q (file %q, or a second plant of that id)", path, p.ID, want)
		}
		ids[p.ID] = true
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(l, "+++ b/"); ok {
				if _, err := os.Stat(filepath.Join("..", "..", "..", name)); err != nil {
					t.Errorf("%s changes %s, which is not in the repository: %v", path, name, err)
				}
			}
		}
	}
}
