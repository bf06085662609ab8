package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	flagRecord = flag.String("sim.record", "", "write a red seed's recording (every step of the sequencer and every fault: record.go) to this directory")
	flagReplay = flag.String("sim.replay", "", "replay this recording (its seed, unless sim.seed names one) and report the first decision that differs")
)

// runWorld and runChain name what a recording is of: TestSim's world, or
// TestChain's chain (make sim runs both).
const (
	runWorld = "seed"
	runChain = "chain-seed"
)

// replaying returns the recording -sim.replay names when it is of this
// run (what, seed), else nil.
func replaying(t *testing.T, what string, seed uint64) *Recording {
	t.Helper()
	if *flagReplay == "" {
		return nil
	}
	rec, err := readRecording(*flagReplay)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Run != what || rec.Seed != seed {
		t.Logf("REPLAY=%s is a recording of %s %d: not replayed here", *flagReplay, rec.Run, rec.Seed)
		return nil
	}
	return &rec
}

// readRecording reads a recording file (writeRecording's).
func readRecording(path string) (Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return Recording{}, fmt.Errorf("REPLAY=%s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	return parseRecording(f, path)
}

// writeRecording writes res's recording to dir/RUN-N.rec (seed-N.rec,
// chain-seed-N.rec) and returns the file's name.
func writeRecording(dir, run string, seed uint64, commit, replay string, res Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := fmt.Sprintf("%s/%s-%d.rec", strings.TrimRight(dir, "/"), run, seed)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := recordingOf(run, seed, commit, replay, res).write(f); err != nil {
		_ = f.Close()
		return "", err
	}
	return path, f.Close()
}

// recordRed writes a red run's recording (-sim.record) and returns the
// report's lines about it. A replay writes none: it would overwrite the
// recording it replays.
func recordRed(what string, seed uint64, replay string, res Result) string {
	if *flagRecord == "" || *flagReplay != "" || len(res.Record) == 0 {
		return ""
	}
	path, err := writeRecording(*flagRecord, what, seed, commit(), replay, res)
	if err != nil {
		return fmt.Sprintf("recording: not written: %v\n", err)
	}
	cmd := strings.Replace(replay, "make sim ", "make sim REPLAY="+path+" ", 1)
	if !strings.HasPrefix(replay, "make sim ") {
		cmd = replay + " -sim.replay=" + path
	}
	return fmt.Sprintf("recording: %s (%d steps, %d faults); replay it: %s\n", path, len(res.Record), len(res.Faults), cmd)
}

// TestRecordingReplays fails if replaying a recording breaks: a run with
// faults is recorded and written to a file; read back, it replays three
// times, each run taking every recorded step and no other, to the same
// digest. Recordings perturbed at a step (another identity, another
// instant, a step left out, a step added at the end) are reported diverged
// at exactly that step, with what was recorded and what was asked.
func TestRecordingReplays(t *testing.T) {
	kinds, err := ParseKinds("")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ParseOps("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Seed: 3, Rate: defaultRate, Kinds: kinds, Ops: ops, Workers: 3, Lambdas: 2, Swarm: true}
	orig := runSeed(t, cfg)
	if len(orig.Faults) == 0 || len(orig.Record) < 100 {
		t.Fatalf("seed 3: %d faults, %d steps: want a run with faults to record", len(orig.Faults), len(orig.Record))
	}
	path, err := writeRecording(t.TempDir(), runWorld, cfg.Seed, "test", "make sim SEED=3", orig)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "seed-3.rec" {
		t.Errorf("recording written to %s", path)
	}
	rec, err := readRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Seed != 3 || rec.Run != runWorld || rec.Digest != orig.Digest() || len(rec.Steps) != len(orig.Record) || len(rec.Faults) != len(orig.Faults) {
		t.Fatalf("read back: seed %d digest %s, %d steps, %d faults; wrote %s, %d, %d", rec.Seed, rec.Digest, len(rec.Steps), len(rec.Faults), orig.Digest(), len(orig.Record), len(orig.Faults))
	}
	for i := range rec.Steps {
		if rec.Steps[i] != orig.Record[i] {
			t.Fatalf("step %d read back as %s, written %s", i, rec.Steps[i], orig.Record[i])
		}
	}
	for i := range 3 {
		c := cfg
		c.Want = rec.Steps
		r := runSeed(t, c)
		if same, report := rec.compare(r); !same {
			t.Fatalf("replay %d: %s", i+1, report)
		}
	}

	k := len(rec.Steps) / 2
	perturb := func(name string, want int, edit func([]Step) []Step) {
		t.Run(name, func(t *testing.T) {
			steps := edit(append([]Step(nil), rec.Steps...))
			c := cfg
			c.Want = steps
			r := runSeed(t, c)
			d := r.Diverged
			if d == nil {
				t.Fatalf("not reported diverged")
			}
			if d.Index != want {
				t.Fatalf("diverged at step %d, want %d: %s", d.Index, want, d)
			}
			if want < len(steps) && d.Recorded != steps[want] {
				t.Errorf("recorded %s, want %s", d.Recorded, steps[want])
			}
			if want < len(orig.Record) && d.Asked != orig.Record[want] {
				t.Errorf("asked %s, want %s", d.Asked, orig.Record[want])
			}
			altered := Recording{Seed: rec.Seed, Digest: rec.Digest, Shape: rec.Shape, Faults: rec.Faults, Steps: steps}
			same, report := altered.compare(r)
			if same || !strings.Contains(report, d.String()) {
				t.Errorf("compare: %v, %s", same, report)
			}
		})
	}
	perturb("identity", k, func(s []Step) []Step { s[k].ID += "x"; return s })
	perturb("instant", k, func(s []Step) []Step { s[k].At++; return s })
	perturb("left-out", k, func(s []Step) []Step { return append(s[:k], s[k+1:]...) })
	perturb("extra", len(rec.Steps), func(s []Step) []Step { return append(s, Step{At: s[len(s)-1].At + 1, ID: "x|y|z#1"}) })
	perturb("short", len(rec.Steps)-1, func(s []Step) []Step { return s[:len(s)-1] })
}
