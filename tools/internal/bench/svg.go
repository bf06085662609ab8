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

// Chart draws messages/s against concurrency, one panel per regime
// (emulator speed, aws-like latency), one line per consumer: the
// hand-written consumer dashed. Each panel has its own scale: the regimes'
// rates are not comparable, the lines within a panel are.
func Chart(r *Result) string {
	regimes := r.regimes()
	if len(regimes) == 0 {
		regimes = []string{RegimeEmulator}
	}
	const (
		panelW, height           = 400, 440
		left, right, top, bottom = 70, 24, 70, 150
	)
	width := len(regimes)*panelW + 10
	plotW, plotH := float64(panelW-left-right), float64(height-top-bottom)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">Throughput against concurrency (effect %s), messages/s</text>`+"\n", left, html.EscapeString(r.Config.Effect))
	for pi, g := range regimes {
		x0 := float64(pi * panelW)
		type series struct {
			name   string
			dashed bool
			points map[int]float64
		}
		var ss []*series
		byName := map[string]*series{}
		var concs []int
		ymax := 0.0
		for _, d := range r.Drains() {
			if d.regime() != g {
				continue
			}
			if !slices.Contains(concs, d.Conc) {
				concs = append(concs, d.Conc)
			}
			name := label(d.Consumer, d.Procs)
			s := byName[name]
			if s == nil {
				s = &series{name: name, dashed: d.Consumer == "baseline", points: map[int]float64{}}
				byName[name] = s
				ss = append(ss, s)
			}
			s.points[d.Conc] = d.Rate
			ymax = max(ymax, d.Rate)
		}
		slices.Sort(concs)
		ymax = niceMax(ymax)
		x := func(i int) float64 {
			if len(concs) <= 1 {
				return x0 + float64(left) + plotW/2
			}
			return x0 + float64(left) + 16 + float64(i)*(plotW-32)/float64(len(concs)-1)
		}
		y := func(v float64) float64 { return float64(top) + plotH*(1-v/ymax) }
		fmt.Fprintf(&b, `<text x="%.1f" y="50" font-weight="bold">%s</text>`+"\n", x0+float64(left), html.EscapeString(regimeName(g)))
		for i := 0; i <= 4; i++ {
			v := ymax * float64(i) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", x0+float64(left), y(v), x0+float64(left)+plotW, y(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%.0f</text>`+"\n", x0+float64(left)-6, y(v)+4, v)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", x0+float64(left), top, x0+float64(left), float64(top)+plotH)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", x0+float64(left), float64(top)+plotH, x0+float64(left)+plotW, float64(top)+plotH)
		for i, c := range concs {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%d</text>`+"\n", x(i), float64(top)+plotH+18, c)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">concurrency</text>`+"\n", x0+float64(left)+plotW/2, float64(top)+plotH+36)
		for si, s := range ss {
			color := colors[si%len(colors)]
			dash := ""
			if s.dashed {
				color, dash = "#7f7f7f", ` stroke-dasharray="5 4"`
			}
			var pts []string
			for i, c := range concs {
				if v, ok := s.points[c]; ok {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
				}
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.2"%s/>`+"\n", strings.Join(pts, " "), color, dash)
			for i, c := range concs {
				if v, ok := s.points[c]; ok {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, concurrency %d: %.0f msg/s</title></circle>`+"\n", x(i), y(v), color, html.EscapeString(s.name), c, v)
				}
			}
			ly := float64(top) + plotH + 58 + float64(si)*18
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.2"%s/>`+"\n", x0+float64(left), ly, x0+float64(left)+22, ly, color, dash)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+float64(left)+28, ly+4, html.EscapeString(s.name))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#777" font-size="10">%s, %d CPUs; %s</text>`+"\n", left, height-4,
		html.EscapeString(r.Machine.CPUModel), r.Machine.CPUs, r.Started.UTC().Format("2006-01-02"))
	b.WriteString("</svg>\n")
	return b.String()
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 10).
func niceMax(v float64) float64 {
	return roundUp125(max(v*1.05, 10))
}

// roundUp125 rounds v > 0 up to 1, 2 or 5 times a power of ten.
func roundUp125(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
