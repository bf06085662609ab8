package sim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A Recording is what the simulation decided in one run, kept so that the
// run can be replayed and checked against it: every step the sequencer
// took (which call reached the world, at which instant, in which order:
// sequencer.go) and every fault the injector gave (fault.go), with the
// run's digest (digest.go). A red seed writes one (-sim.record=DIR); a
// replay (-sim.replay=FILE, make sim SEED=N REPLAY=FILE) runs the seed with
// the recorded steps as Config.Want and names the first decision that
// differs, with what was recorded and what was asked.
type Recording struct {
	Run    string // what ran: "seed" (TestSim's world) or "chain-seed" (TestChain)
	Seed   uint64
	Commit string // the commit the run was made on (seed@commit)
	Replay string // the command that replays it
	Digest string
	Shape  string
	Faults []string // Fault.String and its instant, as the digest has them
	Steps  []Step
}

const recordingMagic = "exactly-sim-recording 1"

// recordingOf is res's recording.
func recordingOf(run string, seed uint64, commit, replay string, res Result) Recording {
	rec := Recording{Run: run, Seed: seed, Commit: commit, Replay: replay, Digest: res.Digest(), Shape: res.Shape, Steps: res.Record}
	for _, f := range res.Faults {
		rec.Faults = append(rec.Faults, faultLine(f))
	}
	return rec
}

func faultLine(f Fault) string { return fmt.Sprintf("%s %d", f, f.At) }

// write writes the recording as text, a line each: a header, the
// faults, then the steps (instant in ns, identity and what it waited for,
// quoted).
func (rec Recording) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, recordingMagic)
	fmt.Fprintf(bw, "run %s\nseed %d\ncommit %s\nreplay %s\ndigest %s\nshape %s\n", rec.Run, rec.Seed, rec.Commit, rec.Replay, rec.Digest, rec.Shape)
	for _, f := range rec.Faults {
		fmt.Fprintf(bw, "fault %s\n", f)
	}
	for _, s := range rec.Steps {
		fmt.Fprintf(bw, "step %d %s %s\n", int64(s.At), strconv.Quote(s.ID), strconv.Quote(s.What))
	}
	return bw.Flush()
}

// parseRecording reads what write wrote; path names it in errors.
func parseRecording(f io.Reader, path string) (Recording, error) {
	var rec Recording
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	n := 0
	bad := func(why string) error {
		return fmt.Errorf("REPLAY=%s, line %d: %s (not a recording the simulation wrote? A red seed writes one under SIM_RECORD)", path, n, why)
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if n == 1 {
			if line != recordingMagic {
				return rec, bad("the first line is not " + strconv.Quote(recordingMagic))
			}
			continue
		}
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "run":
			rec.Run = val
		case "seed":
			var err error
			if rec.Seed, err = strconv.ParseUint(val, 10, 64); err != nil {
				return rec, bad("seed: " + err.Error())
			}
		case "commit":
			rec.Commit = val
		case "replay":
			rec.Replay = val
		case "digest":
			rec.Digest = val
		case "shape":
			rec.Shape = val
		case "fault":
			rec.Faults = append(rec.Faults, val)
		case "step":
			s, err := parseStep(val)
			if err != nil {
				return rec, bad(err.Error())
			}
			rec.Steps = append(rec.Steps, s)
		default:
			return rec, bad("unknown line " + strconv.Quote(key))
		}
	}
	if err := sc.Err(); err != nil {
		return rec, fmt.Errorf("REPLAY=%s: %w", path, err)
	}
	if n == 0 {
		return rec, bad("empty file")
	}
	return rec, nil
}

func parseStep(val string) (Step, error) {
	at, rest, _ := strings.Cut(val, " ")
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Step{}, fmt.Errorf("step instant: %w", err)
	}
	s := Step{At: time.Duration(ns)}
	for i, dst := range []*string{&s.ID, &s.What} {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return Step{}, fmt.Errorf("step field %d: %w", i+2, err)
		}
		*dst, _ = strconv.Unquote(q)
		rest = strings.TrimPrefix(rest[len(q):], " ")
	}
	return s, nil
}

// compare says whether res is the recorded run: its steps (the first
// that differs, with the steps before it), its faults (the first that
// differs) and its digest.
func (rec Recording) compare(res Result) (same bool, report string) {
	var b strings.Builder
	if res.Diverged == nil && res.Digest() == rec.Digest {
		fmt.Fprintf(&b, "replayed the recording exactly: %d steps and %d faults as recorded, digest %s", len(res.Record), len(res.Faults), rec.Digest)
		return true, b.String()
	}
	b.WriteString("replay diverged from the recording")
	if rec.Commit != "" {
		fmt.Fprintf(&b, " (recorded on %s)", rec.Commit)
	}
	b.WriteString(":\n")
	if res.Shape != rec.Shape {
		fmt.Fprintf(&b, "  another world: recorded shape %s\n                 this run's     %s\n  (run it with the recording's settings: %s)\n", rec.Shape, res.Shape, rec.Replay)
	}
	if d := res.Diverged; d != nil {
		fmt.Fprintf(&b, "  first decision that differs: %s\n", d)
		if d.Index > 0 {
			b.WriteString("  the steps before it, as recorded:\n")
			for i := max(0, d.Index-4); i < d.Index && i < len(rec.Steps); i++ {
				fmt.Fprintf(&b, "    %d: %s\n", i, rec.Steps[i])
			}
		}
	} else {
		fmt.Fprintf(&b, "  every one of the %d steps as recorded\n", len(rec.Steps))
	}
	var faults []string
	for _, f := range res.Faults {
		faults = append(faults, faultLine(f))
	}
	for i := range max(len(faults), len(rec.Faults)) {
		var x, y string
		if i < len(rec.Faults) {
			x = rec.Faults[i]
		}
		if i < len(faults) {
			y = faults[i]
		}
		if x != y {
			fmt.Fprintf(&b, "  first fault that differs, %d: recorded %q, given %q\n", i, x, y)
			break
		}
	}
	fmt.Fprintf(&b, "  digest %s, recorded %s", res.Digest(), rec.Digest)
	return false, b.String()
}
