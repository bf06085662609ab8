// Command consoleshots writes screenshots of worker console's main pages
// (PNG) into a directory: the console over the seeded in-memory stores
// (internal/console/consoletest), in a headless Chromium. make
// console-screenshots runs it into docs/console.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

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
	base, stop, err := consoletest.Serve(w, true)
	if err != nil {
		return err
	}
	defer stop()
	profile, err := os.MkdirTemp("", "consoleshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
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
		{"stuck", "/stuck"},
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
