package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// lines is what a replay of the seed must reproduce, one line each: the
// violations, every fault (where, what, when, by whom), the statistics, the
// virtual time the run took and every logical message's SQS story.
func (r Result) lines() []string {
	var out []string
	out = append(out, "shape "+r.Shape)
	for _, v := range r.Violations {
		out = append(out, "violation "+v)
	}
	for _, f := range r.Faults {
		out = append(out, "fault "+f.String()+fmt.Sprintf(" %d", f.At))
	}
	names := make([]string, 0, len(r.Stats))
	for k := range r.Stats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, fmt.Sprintf("stat %s = %d", k, r.Stats[k]))
	}
	for _, t := range r.Trace {
		out = append(out, "story "+t)
	}
	return append(out, fmt.Sprintf("virtual %s", r.Virtual))
}

// Digest is a short hash of everything a replay must reproduce (lines).
func (r Result) Digest() string {
	h := sha256.New()
	for _, l := range r.lines() {
		_, _ = io.WriteString(h, l)
		_, _ = h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// firstDiff names the earliest step of a story where two runs of a seed
// differ, and the first line where they differ.
func firstDiff(a, b Result) string {
	early, at := "", time.Duration(-1)
	for i := range min(len(a.Trace), len(b.Trace)) {
		sa, sb := strings.Split(a.Trace[i], " | "), strings.Split(b.Trace[i], " | ")
		for j := range max(len(sa), len(sb)) {
			var x, y string
			if j < len(sa) {
				x = sa[j]
			}
			if j < len(sb) {
				y = sb[j]
			}
			if x == y {
				continue
			}
			d := stepAt(x)
			if e := stepAt(y); e >= 0 && (d < 0 || e < d) {
				d = e
			}
			if d >= 0 && (at < 0 || d < at) {
				at, early = d, fmt.Sprintf("earliest story step apart at +%s (message %d):\n  - %s\n  + %s\n", d, i, clip(x), clip(y))
			}
			break
		}
	}
	return early + lineDiff(a, b)
}

// stepAt reads a story step's time ("+1m52s ..."), -1 if none.
func stepAt(step string) time.Duration {
	step = strings.TrimSpace(step)
	if i := strings.IndexByte(step, ':'); i >= 0 && i < 6 {
		step = strings.TrimSpace(step[i+1:])
	}
	f := strings.Fields(step)
	if len(f) == 0 || !strings.HasPrefix(f[0], "+") {
		return -1
	}
	d, err := time.ParseDuration(f[0][1:])
	if err != nil {
		return -1
	}
	return d
}

func lineDiff(a, b Result) string {
	la, lb := a.lines(), b.lines()
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			// A story is long: show the first step that differs.
			sa, sb := strings.Split(la[i], " | "), strings.Split(lb[i], " | ")
			j := 0
			for j < min(len(sa), len(sb))-1 && sa[j] == sb[j] {
				j++
			}
			return fmt.Sprintf("line %d (%s), step %d:\n  - %s\n  + %s", i, clip(sa[0][:min(len(sa[0]), 40)]), j, clip(sa[j]), clip(sb[j]))
		}
	}
	if len(la) != len(lb) {
		return fmt.Sprintf("%d lines, then %d", len(la), len(lb))
	}
	return ""
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return strings.TrimSpace(s)
}
