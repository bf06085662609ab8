// Command consoleshots writes screenshots of worker console's main pages
// (PNG) into a directory: the console over the seeded in-memory stores
// (internal/console/consoletest), in a headless Chromium. make
// console-screenshots runs it into docs/console.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/exactly/internal/console"
	ctest "github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/tools/consoletest"
)

func main() {
	out := flag.String("out", "docs/console", "directory to write the PNGs into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "consoleshots:", err)
		os.Exit(1)
	}
}

// withRates is a read-write console over w whose overview has a few
// minutes of made-up worker rates to draw: a worker's /metrics, sampled
// every 5 s of a clock that the samples move on.
func withRates(ctx context.Context, w *ctest.World, addr string) (*console.Console, error) {
	var mu sync.Mutex
	i := 0
	metrics := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n := float64(i)
		fmt.Fprintf(rw, "exactly_messages_received_total %g\nexactly_effects_applied_total %g\nexactly_duplicates_total %g\n",
			n*60+10*math.Sin(n/3), n*52+8*math.Sin(n/3), n*8+2*math.Cos(n/2))
		fmt.Fprintf(rw, "exactly_conflicts_total 0\nexactly_retries_total %g\nexactly_permanent_failures_total %d\n", math.Floor(n/4), i/20)
	}))
	cfg := w.Config(true)
	cfg.Addr = addr
	cfg.Metrics = []string{metrics.URL + "/metrics"}
	start := time.Now().Add(-5 * time.Minute)
	cfg.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if i <= 60 {
			return start.Add(time.Duration(i) * 5 * time.Second)
		}
		return time.Now()
	}
	c, err := console.New(cfg)
	if err != nil {
		return nil, err
	}
	for range 61 {
		c.Sample(ctx)
		mu.Lock()
		i++
		mu.Unlock()
	}
	metrics.Close()
	return c, nil
}

func run(out string) error {
	path, err := consoletest.Chromium()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	w, err := ctest.New(ctx, time.Now())
	if err != nil {
		return err
	}
	base, stop, err := consoletest.ServeConsole(func(addr string) (*console.Console, error) { return withRates(ctx, w, addr) })
	if err != nil {
		return err
	}
	defer stop()
	profile, err := os.MkdirTemp("", "consoleshots-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(profile) }()
	bctx, cancel := consoletest.Browser(ctx, path, profile, 1280, 800)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		return err
	}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"find", "/find?queue=orders.fifo&group=" + w.DoneGroup + "&dedup_id=" + w.DoneDedupID},
		{"dead-letters", "/dlq?queue=orders.fifo"},
		{"redrive-preview", "/dlq/preview?queue=orders.fifo&group=acct-7"},
		{"find-dead-letter", "/find?queue=orders.fifo&dedup_id=order-1410"},
		{"stuck", "/stuck"},
		{"conflicts", "/conflicts"},
		{"forget", "/forget?key=" + url.QueryEscape(w.StuckKeys[0])},
		{"outbox", "/outbox"},
		{"outbox-release", "/outbox/release?queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.HeldGroup},
	}
	for _, p := range pages {
		sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		if err := chromedp.Do(sctx, chromedp.Navigate(base+p.path), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
			cancel()
			return fmt.Errorf("%s: %w", p.name, err)
		}
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: screenshot: %w", p.name, err)
		}
		f := filepath.Join(out, p.name+".png")
		if err := os.WriteFile(f, png, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", f)
	}
	return nil
}
