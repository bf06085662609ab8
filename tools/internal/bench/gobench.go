package bench

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// GoBench is one result line of `go test -bench`.
type GoBench struct {
	Package string
	Name    string // without the Benchmark prefix and the -GOMAXPROCS suffix
	N       int
	Values  map[string]float64 // by unit: ns/op, allocs/op, msgs/s, ...
	Units   []string           // in the order printed
	// Load is the 1-minute load average as its package's benchmarks
	// began: a "load: " line (/proc/loadavg) before the package's
	// output, as make bench writes one.
	Load string `json:",omitempty"`
}

// GoBenchStartedPrefix starts a line with the time (RFC 3339) make bench
// began its in-memory benchmarks.
const GoBenchStartedPrefix = "started: "

// goBenchStarted is the time of out's "started: " line, zero without one.
func goBenchStarted(out string) time.Time {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, GoBenchStartedPrefix); ok {
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(v)); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// GoBenchLoadPrefix starts a line of /proc/loadavg in `go test -bench`
// output: the load as the next package's benchmarks begin.
const GoBenchLoadPrefix = "load: "

// ParseGoBench reads `go test -bench` output; lines it does not know are
// skipped.
func ParseGoBench(out string) []GoBench {
	var res []GoBench
	pkg, load := "", ""
	for _, line := range strings.Split(out, "\n") {
		if l, ok := strings.CutPrefix(line, GoBenchLoadPrefix); ok {
			load = load1(l)
			continue
		}
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 4 || !strings.HasPrefix(fs[0], "Benchmark") || len(fs)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(fs[1])
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(fs[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		b := GoBench{Package: pkg, Name: name, N: n, Values: map[string]float64{}, Load: load}
		ok := true
		for i := 2; i+1 < len(fs); i += 2 {
			v, err := strconv.ParseFloat(fs[i], 64)
			if err != nil {
				ok = false
				break
			}
			b.Values[fs[i+1]] = v
			b.Units = append(b.Units, fs[i+1])
		}
		if ok {
			res = append(res, b)
		}
	}
	return res
}

// preferred order of columns; other units follow in the order seen.
var unitOrder = []string{"msgs/s", "raw-msgs/s", "x-raw", "p50-us", "p99-us", "allocs/op", "raw-allocs/msg", "B/op",
	"receives/msg", "delete-batches/msg", "visibility-batches/msg", "ns/op"}

func unitColumns(bs []GoBench) []string {
	seen := map[string]bool{}
	for _, b := range bs {
		for _, u := range b.Units {
			seen[u] = true
		}
	}
	var cols []string
	for _, u := range unitOrder {
		if seen[u] {
			cols = append(cols, u)
			delete(seen, u)
		}
	}
	for _, b := range bs {
		for _, u := range b.Units {
			if seen[u] {
				cols = append(cols, u)
				delete(seen, u)
			}
		}
	}
	return cols
}

func byPackage(bs []GoBench) (pkgs []string, groups map[string][]GoBench) {
	groups = map[string][]GoBench{}
	for _, b := range bs {
		if _, ok := groups[b.Package]; !ok {
			pkgs = append(pkgs, b.Package)
		}
		groups[b.Package] = append(groups[b.Package], b)
	}
	return pkgs, groups
}

func fmtValue(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 100 || v == float64(int64(v)):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// WriteGoBenchText prints the results as aligned tables, one per package.
// "/op" is per message for the pool benchmarks, whose op is one message.
func WriteGoBenchText(w io.Writer, bs []GoBench) {
	pkgs, groups := byPackage(bs)
	for i, pkg := range pkgs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		g := groups[pkg]
		cols := unitColumns(g)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\t", pkg)
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
		for _, b := range g {
			fmt.Fprintf(tw, "%s\t", b.Name)
			for _, c := range cols {
				if v, ok := b.Values[c]; ok {
					fmt.Fprintf(tw, "%s\t", fmtValue(v))
				} else {
					fmt.Fprint(tw, "\t")
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}

func goBenchMarkdown(b *strings.Builder, bs []GoBench) {
	pkgs, groups := byPackage(bs)
	for _, pkg := range pkgs {
		g := groups[pkg]
		cols := unitColumns(g)
		fmt.Fprintf(b, "`%s`\n\n| benchmark |", pkg)
		for _, c := range cols {
			fmt.Fprintf(b, " %s |", c)
		}
		b.WriteString(" load (1 min) at start |\n|---|")
		for range cols {
			b.WriteString("---:|")
		}
		b.WriteString("---:|\n")
		for _, r := range g {
			fmt.Fprintf(b, "| %s |", r.Name)
			for _, c := range cols {
				if v, ok := r.Values[c]; ok {
					fmt.Fprintf(b, " %s |", fmtValue(v))
				} else {
					b.WriteString(" |")
				}
			}
			fmt.Fprintf(b, " %s |\n", cmp.Or(r.Load, "-"))
		}
		b.WriteString("\n")
	}
}
