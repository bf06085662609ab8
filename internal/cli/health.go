package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/config"
)

// healthcheckCommand asks the worker's own /healthz (or --path) and exits 0
// when it answers 200, 1 otherwise: the container image has no shell or
// curl, so ECS's container health check runs `/worker healthcheck`.
func healthcheckCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var addr, path string
	var timeout time.Duration
	fs := config.NewSet("worker healthcheck", nil, lookup)
	fs.SetOutput(stderr)
	fs.String(&addr, "metrics-addr", "WORKER_METRICS_ADDR", DefaultMetricsAddr, "address the worker serves /healthz on (a host-less \":9090\" means this host)")
	fs.String(&path, "path", "", "/healthz", "path to ask: /healthz (alive) or /readyz (started and not draining)")
	fs.Duration(&timeout, "timeout", "", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return config.Errorf("%s %q: want host:port or :port", fs.Name("metrics-addr"), addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if !strings.HasPrefix(path, "/") {
		return config.Errorf("%s %q: want a path such as /healthz", fs.Name("path"), path)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // nothing to report
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("unhealthy: %s answered %s", url, resp.Status)
	}
	fmt.Fprintln(stdout, "healthy:", url)
	return nil
}
