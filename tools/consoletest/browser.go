// Package consoletest drives worker console in a real headless Chromium
// (Debian's chromium package) through chromedp: the console's end-to-end
// test, and the screenshots in docs/console (cmd/consoleshots).
package consoletest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/exactly/internal/console"
	"github.com/exactlyonce/exactly/internal/console/consoletest"
)

// ErrNoChromium is returned when there is no chromium on PATH (apt-get install chromium), and
// CHROMIUM does not name one.
var ErrNoChromium = errors.New("no chromium on PATH (apt-get install -y chromium) and CHROMIUM unset")

// Chromium finds the browser: $CHROMIUM, else chromium or chromium-browser on PATH.
func Chromium() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Browser starts a headless Chromium with a fresh profile in userDataDir;
// cancel stops it.
func Browser(ctx context.Context, path, userDataDir string, width, height int) (context.Context, context.CancelFunc) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	return bctx, func() { cancelBrowser(); cancelAlloc() }
}

// Serve serves a console over a seeded world on a loopback port; stop
// closes it.
func Serve(w *consoletest.World, write bool) (url string, stop func(), err error) {
	return ServeConsole(func(addr string) (*console.Console, error) {
		cfg := w.Config(write)
		cfg.Addr = addr
		return console.New(cfg)
	})
}

// ServeConsole serves the console newConsole makes for the loopback
// address it listens on (the Host the console answers to); stop closes it.
func ServeConsole(newConsole func(addr string) (*console.Console, error)) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	c, err := newConsole(ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}
