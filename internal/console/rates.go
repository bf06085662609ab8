package console

import (
	"bufio"
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The workers' counters the overview draws as rates, in order.
var rateMetrics = []struct{ Name, Label string }{
	{"exactly_messages_received_total", "received"},
	{"exactly_effects_applied_total", "applied"},
	{"exactly_duplicates_total", "duplicates"},
	{"exactly_conflicts_total", "conflicts"},
	{"exactly_retries_total", "retries"},
	{"exactly_permanent_failures_total", "permanent failures"},
}

// rateSamples keeps the last samples of the counters, summed over the
// endpoints and their labels.
const rateSamples = 61

type sample struct {
	at     time.Time
	totals map[string]float64
}

type rates struct {
	urls   []string
	client *http.Client

	mu      sync.Mutex
	samples []sample
	errs    map[string]string // url -> last scrape's error
}

// Sample scrapes the workers' /metrics once (Config.Metrics). Run calls it
// every Config.ScrapeEvery; tests call it directly.
func (c *Console) Sample(ctx context.Context) {
	r := c.rates
	if r == nil {
		return
	}
	s := sample{at: c.cfg.Now(), totals: map[string]float64{}}
	errs := map[string]string{}
	for _, u := range r.urls {
		if err := r.scrape(ctx, u, s.totals); err != nil {
			errs[u] = err.Error()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = errs
	r.samples = append(r.samples, s)
	if len(r.samples) > rateSamples {
		r.samples = r.samples[len(r.samples)-rateSamples:]
	}
}

// Run samples the workers' metrics until ctx ends (nothing without
// Config.Metrics).
func (c *Console) Run(ctx context.Context) {
	if c.rates == nil {
		return
	}
	t := time.NewTicker(c.cfg.ScrapeEvery)
	defer t.Stop()
	for {
		c.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *rates) scrape(ctx context.Context, url string, totals map[string]float64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, rest = line[:i], line[j+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 || !isRateMetric(name) {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			totals[name] += v
		}
	}
	return sc.Err()
}

func isRateMetric(name string) bool {
	for _, m := range rateMetrics {
		if m.Name == name {
			return true
		}
	}
	return false
}

// rateRow is one counter's rate for the overview: the last one and a
// sparkline of the window.
type rateRow struct {
	Label string
	Last  string
	Chart template.HTML
}

type rateView struct {
	Rows   []rateRow
	Window time.Duration
	Errs   map[string]string
	URLs   []string
}

func (r *rates) view() *rateView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := &rateView{Errs: r.errs, URLs: r.urls}
	if n := len(r.samples); n >= 2 {
		v.Window = r.samples[n-1].at.Sub(r.samples[0].at).Round(time.Second)
	}
	for _, m := range rateMetrics {
		var pts []float64
		for i := 1; i < len(r.samples); i++ {
			a, b := r.samples[i-1], r.samples[i]
			dt := b.at.Sub(a.at).Seconds()
			d := b.totals[m.Name] - a.totals[m.Name]
			if dt <= 0 || d < 0 { // a restarted worker's counters start again
				d = 0
			}
			if dt > 0 {
				pts = append(pts, d/dt)
			}
		}
		row := rateRow{Label: m.Label, Last: "-"}
		if len(pts) > 0 {
			row.Last = strconv.FormatFloat(pts[len(pts)-1], 'f', 1, 64) + "/s"
		}
		row.Chart = sparkline(pts, 160, 28)
		v.Rows = append(v.Rows, row)
	}
	return v
}

// sparkline draws pts as an inline SVG polyline (numbers only: safe HTML).
func sparkline(pts []float64, w, h int) template.HTML {
	if len(pts) < 2 {
		svg := fmt.Sprintf(`<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="not enough samples yet"><line x1="0" y1="%d" x2="%d" y2="%d" class="base"/></svg>`, w, h, w, h, h-1, w, h-1)
		return template.HTML(svg) //nolint:gosec // only numbers are formatted into it
	}
	top := 0.0
	for _, p := range pts {
		top = max(top, p)
	}
	var b strings.Builder
	for i, p := range pts {
		x := float64(i) * float64(w-2) / float64(len(pts)-1)
		y := float64(h - 2)
		if top > 0 {
			y = float64(h-2) - p/top*float64(h-4)
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", x+1, y+1)
	}
	svg := fmt.Sprintf(`<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="peak %.1f/s"><polyline points="%s"/></svg>`,
		w, h, w, h, top, strings.TrimSpace(b.String()))
	return template.HTML(svg) //nolint:gosec // only numbers are formatted into it
}
