package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// ChartFile is the chart's file name, written beside the report.
const ChartFile = "bench-throughput.svg"

type series struct {
	name   string
	color  string
	dashed bool
	points map[int]Drain // by concurrency
}

// Chart draws throughput against concurrency per process as an SVG line
// chart: one line per worker process count and one for the baseline, in
// messages/s as a share of the limit measured in the same run.
func Chart(r *Result) string {
	const (
		width, height            = 820, 460
		left, right, top, bottom = 72, 260, 64, 64
	)
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	limit := r.Limit()
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"}
	var ss []*series
	byProcs := map[int]*series{}
	var base *series
	concs := []int{}
	for _, d := range r.Drains() {
		if !slices.Contains(concs, d.Conc) {
			concs = append(concs, d.Conc)
		}
		if d.Consumer == "baseline" {
			if base == nil {
				base = &series{name: "baseline (receive 1, delete 1)", color: "#7f7f7f", dashed: true, points: map[int]Drain{}}
			}
			base.points[d.Conc] = d
			continue
		}
		k := d.Procs
		if d.Consumer != "worker" {
			k = -len(ss) - 1 // another commit mode: a line of its own
			for p, s := range byProcs {
				if p < 0 && s.name == label(d.Consumer, d.Procs) {
					k = p
				}
			}
		}
		s := byProcs[k]
		if s == nil {
			name := "worker, 1 process"
			if d.Procs > 1 {
				name = fmt.Sprintf("worker, %d processes", d.Procs)
			}
			if d.Consumer != "worker" {
				name = label(d.Consumer, d.Procs)
			}
			s = &series{name: name, color: colors[len(byProcs)%len(colors)], points: map[int]Drain{}}
			byProcs[k] = s
			ss = append(ss, s)
		}
		s.points[d.Conc] = d
	}
	slices.SortFunc(ss, func(a, b *series) int { return strings.Compare(a.name, b.name) })
	if base != nil {
		ss = append(ss, base)
	}
	slices.Sort(concs)

	share := func(rate float64) float64 {
		if limit <= 0 {
			return 0
		}
		return 100 * rate / limit
	}
	path := r.MeanLimits().Path
	drains := r.Drains()
	ymax := 100.0
	for _, d := range drains {
		ymax = max(ymax, 100*d.Share())
	}
	ymax = max(ymax, share(path))
	ymax = math.Ceil(ymax*1.05/20) * 20
	x := func(i int) float64 {
		if len(concs) == 1 {
			return float64(left) + plotW/2
		}
		return float64(left) + 20 + float64(i)*(plotW-40)/float64(len(concs)-1)
	}
	y := func(v float64) float64 { return float64(top) + plotH*(1-v/ymax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">Throughput against concurrency (effect %s)</text>`+"\n", left, html.EscapeString(r.Config.Effect))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#444">messages/s as a share of the limit the emulators set while each run ran (%s; mean %.0f msg/s)</text>`+"\n", left, r.first().By(), limit)
	// Grid and y axis.
	step := 20.0
	if ymax > 200 {
		step = 50
	}
	for v := 0.0; v <= ymax+1e-9; v += step {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", left, y(v), float64(left)+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#444">%.0f%%</text>`+"\n", left-8, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#444"/>`+"\n", left, top, left, float64(top)+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, float64(top)+plotH, float64(left)+plotW, float64(top)+plotH)
	for i, c := range concs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%d</text>`+"\n", x(i), float64(top)+plotH+18, c)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">--concurrency per process (baseline: goroutines)</text>`+"\n", float64(left)+plotW/2, height-16)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">share of the limit</text>`+"\n", float64(top)+plotH/2)
	// Reference lines.
	// Reference lines; the legend names them.
	type refLine struct{ name, color, dash string }
	var refs []refLine
	ref := func(v float64, r refLine) {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n", left, y(v), float64(left)+plotW, y(v), r.color, r.dash)
		refs = append(refs, r)
	}
	ref(100, refLine{"limit (100%)", "#d62728", "6 4"})
	if path > 0 {
		ref(share(path), refLine{"worker's DynamoDB calls alone", "#555555", "2 3"})
	}
	// Series.
	legendY := float64(top) + 8
	for li, s := range ss {
		var pts []string
		for i, c := range concs {
			if d, ok := s.points[c]; ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(100*d.Share())))
			}
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		for i, c := range concs {
			if d, ok := s.points[c]; ok {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, concurrency %d: %.0f msg/s (%.0f%%)</title></circle>`+"\n",
					x(i), y(100*d.Share()), s.color, html.EscapeString(s.name), c, d.Rate, 100*d.Share())
			}
		}
		ly := legendY + float64(li)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.2"%s/>`+"\n", float64(left)+plotW+14, ly, float64(left)+plotW+36, ly, s.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", float64(left)+plotW+42, ly+4, html.EscapeString(s.name))
	}
	for i, r := range refs {
		ly := legendY + float64(len(ss)+i)*18 + 6
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n", float64(left)+plotW+14, ly, float64(left)+plotW+36, ly, r.color, r.dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", float64(left)+plotW+42, ly+4, html.EscapeString(r.name))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#777" font-size="10">%s, %d CPUs; %s</text>`+"\n", left, height-2,
		html.EscapeString(r.Machine.CPUModel), r.Machine.CPUs, r.Started.UTC().Format("2006-01-02"))
	b.WriteString("</svg>\n")
	return b.String()
}
