package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// CPUProfile is where a consumer process's CPU went, by category.
type CPUProfile struct {
	Consumer   string
	Regime     string
	Conc       int
	Total      time.Duration
	Categories []ProfileShare // largest first
}

// ProfileShare is one category's CPU time.
type ProfileShare struct {
	Name string
	Time time.Duration
}

// Share is the category's share of the total.
func (p CPUProfile) Share(name string) float64 {
	for _, c := range p.Categories {
		if c.Name == name && p.Total > 0 {
			return float64(c.Time) / float64(p.Total)
		}
	}
	return 0
}

// profileCategories classify a stack by its leaf-most frame that matches
// one of them (runtime frames pass to their caller): so the SHA-256 of a
// signature counts as signing, the one of a TLS record as network, an
// allocation as what allocated.
var profileCategories = []struct{ name, pattern string }{
	{"signing (SigV4)", "aws-sdk-go-v2/aws/signer"},
	{"serialisation (JSON, attribute values)", "encoding/json"},
	{"serialisation (JSON, attribute values)", "smithy-go/encoding"},
	{"serialisation (JSON, attribute values)", "awsAwsjson10_"},
	{"serialisation (JSON, attribute values)", "smithy-go/document"},
	{"serialisation (JSON, attribute values)", "aws/protocol"},
	{"HTTP, TLS and syscalls", "net/http"},
	{"HTTP, TLS and syscalls", "crypto/tls"},
	{"HTTP, TLS and syscalls", "net."},
	{"HTTP, TLS and syscalls", "internal/poll"},
	{"HTTP, TLS and syscalls", "syscall."},
	{"metrics (Prometheus)", "prometheus"},
	{"logging (slog)", "log/slog"},
	{"tracing (OpenTelemetry)", "opentelemetry"},
	{"the fakes and the latency layer (aws regime only)", "internal/memsqs"},
	{"the fakes and the latency layer (aws regime only)", "internal/memdynamo"},
	{"the fakes and the latency layer (aws regime only)", "tools/internal/bench"},
	{"SDK middleware, retries, endpoints", "aws-sdk-go-v2"},
	{"SDK middleware, retries, endpoints", "smithy-go"},
	{"the worker's own code: pool", "exactlyonce/exactly/internal/pool."},
	{"the worker's own code: processor", "exactlyonce/exactly/internal/process."},
	{"the worker's own code: dedup ledger", "exactlyonce/exactly/internal/dedup."},
	{"the worker's own code: metrics and logs", "exactlyonce/exactly/internal/telemetry."},
	{"the worker's own code: the ledger effect", "exactlyonce/exactly/internal/builtin."},
	{"the worker's own code: the rest", "exactlyonce/exactly"},
}

// Uncategorised stacks: the garbage collector, the scheduler, the rest.
const (
	catGC        = "garbage collector"
	catScheduler = "scheduler and idle polling"
	catOther     = "other"
)

// shared are the worker's helper packages that the fakes use too (item
// sizes, randomness): their frames pass to their caller, as runtime ones do,
// so that the fakes' use of them counts as the fakes'.
var shared = []string{"exactlyonce/exactly/internal/ddblimit.", "exactlyonce/exactly/internal/jitter."}

// classify returns the category of a stack, leaf first.
func classify(frames []string) string {
	for _, f := range frames {
		if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "internal/runtime") || strings.HasPrefix(f, "runtime/") ||
			slices.ContainsFunc(shared, func(p string) bool { return strings.Contains(f, p) }) {
			continue
		}
		for _, c := range profileCategories {
			if strings.Contains(f, c.pattern) {
				return c.name
			}
		}
	}
	for _, f := range frames {
		if strings.Contains(f, "gcBgMarkWorker") || strings.Contains(f, "runtime.gc") || strings.Contains(f, "bgsweep") || strings.Contains(f, "bgscavenge") {
			return catGC
		}
	}
	for _, f := range frames {
		if strings.Contains(f, "runtime.schedule") || strings.Contains(f, "runtime.mcall") || strings.Contains(f, "runtime.sysmon") {
			return catScheduler
		}
	}
	return catOther
}

// parseTraces reads `go tool pprof -traces` and sums the samples by
// category.
func parseTraces(text string) (total time.Duration, shares []ProfileShare, err error) {
	by := map[string]time.Duration{}
	var frames []string
	var cur time.Duration
	flush := func() {
		if len(frames) > 0 {
			by[classify(frames)] += cur
			total += cur
		}
		frames, cur = nil, 0
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			in = true
			continue
		}
		if !in || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(frames) == 0 && cur == 0 && len(f) >= 2 {
			d, perr := time.ParseDuration(f[0])
			if perr != nil {
				return 0, nil, fmt.Errorf("pprof traces: %q: %w", line, perr)
			}
			cur = d
			frames = append(frames, f[1])
			continue
		}
		if len(f) >= 1 {
			frames = append(frames, f[0])
		}
	}
	flush()
	for k, v := range by {
		shares = append(shares, ProfileShare{Name: k, Time: v})
	}
	slices.SortFunc(shares, func(a, b ProfileShare) int {
		if a.Time != b.Time {
			return int(b.Time - a.Time)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return total, shares, sc.Err()
}

// readProfile summarises a CPU profile of bin with the go tool.
func readProfile(ctx context.Context, bin, file string) (time.Duration, []ProfileShare, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", bin, file).Output()
	if err != nil {
		return 0, nil, fmt.Errorf("go tool pprof: %w", err)
	}
	return parseTraces(string(out))
}

func (p *CPUProfile) table() *table {
	t := &table{head: []string{"where the CPU went", "share", "CPU time"}}
	seen := map[string]bool{}
	for _, c := range p.Categories {
		seen[c.Name] = true
		t.add(c.Name, fmt.Sprintf("%.1f%%", 100*float64(c.Time)/float64(max(p.Total, 1))), c.Time.Round(time.Millisecond).String())
	}
	// The categories the profile never met, so that a reader sees them
	// at zero rather than wonders.
	for _, c := range profileCategories {
		if !seen[c.name] {
			seen[c.name] = true
			t.add(c.name, "0%", "0s")
		}
	}
	return t
}

// profileMarkdown says where the worker's CPU goes.
func profileMarkdown(b *strings.Builder, r *Result) {
	if r.Profile == nil {
		awsProfileMarkdown(b, r, true)
		return
	}
	p := r.Profile
	b.WriteString("## Where the worker's CPU goes\n\n")
	p.table().markdown(b)
	n := int(p.Total / (10 * time.Millisecond))
	fmt.Fprintf(b, "\nThe worker at %s, concurrency %d: %d samples, a share ±%.0f points. ",
		regimeName(p.Regime), p.Conc, n, 100/math.Sqrt(float64(max(n, 1))))
	b.WriteString(r.cpuMissSentence(p) + "\n\n")
	awsProfileMarkdown(b, r, false)
}

// perMessage is a profile's categories in µs of CPU per message: each
// share of the profile times the run's CPU per message over its window.
func (r Drain) profilePerMessage() map[string]float64 {
	out := map[string]float64{}
	if r.Profile == nil || r.Profile.Total <= 0 {
		return out
	}
	cpu := r.CPUPerMessage()
	for _, c := range r.Profile.Categories {
		out[c.Name] = cpu * float64(c.Time) / float64(r.Profile.Total)
	}
	return out
}

// awsProfiles averages, for each concurrency, the per-message categories
// of the profiled aws-regime runs of the worker and of the hand-written
// consumer (over rounds), with their CPU per message.
func awsProfiles(r *Result) (concs []int, by map[int]map[string]map[string]float64) {
	by = map[int]map[string]map[string]float64{}
	count := map[[2]any]int{}
	for _, d := range r.Runs {
		if d.Regime != RegimeAWS || d.Profile == nil || (d.Consumer != "worker" && d.Consumer != "baseline") {
			continue
		}
		if by[d.Conc] == nil {
			by[d.Conc] = map[string]map[string]float64{"worker": {}, "baseline": {}}
			concs = append(concs, d.Conc)
		}
		k := [2]any{d.Conc, d.Consumer}
		n := float64(count[k])
		m := by[d.Conc][d.Consumer]
		per := d.profilePerMessage()
		per[cpuTotal] = d.CPUPerMessage()
		for name := range m {
			if _, ok := per[name]; !ok && name != cpuSamples {
				per[name] = 0
			}
		}
		for name, v := range per {
			m[name] = (m[name]*n + v) / (n + 1) // a category a round missed counts as 0 there
		}
		m[cpuSamples] += float64(d.Profile.Total / (10 * time.Millisecond)) // summed over rounds
		count[k]++
	}
	slices.Sort(concs)
	return concs, by
}

const (
	cpuTotal   = "total (CPU µs/msg over the window)"
	cpuSamples = "profile samples at 100 Hz, all rounds (one is 10 ms over the run's messages)"
)

// awsProfileMarkdown says where the worker's CPU per message goes beyond
// the hand-written consumer's, at AWS-like latency.
func awsProfileMarkdown(b *strings.Builder, r *Result, heading bool) {
	concs, by := awsProfiles(r)
	if len(concs) == 0 {
		return
	}
	if heading {
		b.WriteString("## Where the worker's CPU goes\n\n")
	}
	b.WriteString("### Per message, against the hand-written consumer (aws-like latency)\n\n")
	t := &table{head: []string{"where the CPU went, µs/msg"}}
	for _, c := range concs {
		t.head = append(t.head, fmt.Sprintf("worker, conc %d", c), fmt.Sprintf("hand-written, conc %d", c), fmt.Sprintf("difference, conc %d", c))
	}
	names := map[string]bool{}
	for _, c := range concs {
		for _, who := range []string{"worker", "baseline"} {
			for n := range by[c][who] {
				names[n] = true
			}
		}
	}
	diff := func(n string) float64 {
		var d float64
		for _, c := range concs {
			d += by[c]["worker"][n] - by[c]["baseline"][n]
		}
		return d
	}
	var order []string
	for n := range names {
		if n != cpuTotal && n != cpuSamples {
			order = append(order, n)
		}
	}
	slices.SortFunc(order, func(a, b string) int {
		if da, db := diff(a), diff(b); da != db {
			if da > db {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, n := range append(order, cpuTotal, cpuSamples) {
		row := []string{n}
		for _, c := range concs {
			w, h := by[c]["worker"][n], by[c]["baseline"][n]
			if n == cpuSamples {
				row = append(row, fmt.Sprintf("%.0f", w), fmt.Sprintf("%.0f", h), "")
				continue
			}
			row = append(row, fmt.Sprintf("%.1f", w), fmt.Sprintf("%.1f", h), fmt.Sprintf("%+.1f", w-h))
		}
		t.add(row...)
	}
	t.markdown(b)
	b.WriteString("\nOn the in-memory fakes, no SDK: the fakes' row is the dedup record they store for the worker, the scheduler's the idle polling of a low rate.\n\n")
}

// ownCode is the profile categories of the worker's own packages.
const ownCode = "the worker's own code"

// cpuMissSentence says what the CPU target's ratio is made of: the
// worker's own code's share of its profile, and what the rest is.
func (r *Result) cpuMissSentence(p *CPUProfile) string {
	var own time.Duration
	for _, c := range p.Categories {
		if strings.HasPrefix(c.Name, ownCode) {
			own += c.Time
		}
	}
	var ratios, concs []string
	for _, t := range r.Targets() {
		if strings.HasPrefix(t.Name, "CPU/msg") && !t.Missing {
			ratios = append(ratios, fmt.Sprintf("%.2f", t.Value))
			concs = append(concs, strings.TrimPrefix(t.Run[strings.LastIndex(t.Run, " ")+1:], " "))
		}
	}
	line := fmt.Sprintf("The worker's own code is %.0f %% of it", 100*float64(own)/float64(max(p.Total, 1)))
	if len(ratios) > 0 {
		line = fmt.Sprintf("Its CPU per message is %s× the hand-written consumer's at concurrency %s (bound %.2f): its own code is %.0f %% of it",
			strings.Join(ratios, ", "), strings.Join(concs, ", "), TargetCPU, 100*float64(own)/float64(max(p.Total, 1)))
	}
	return line + "; the rest is the SDK, HTTP, signing and garbage of requests that also carry the dedup record, which an at-least-once consumer does not write."
}
