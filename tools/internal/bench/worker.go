package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildWorker builds cmd/worker into dir with the go tool, as the end-to-end
// tests do, and returns the binary's path. It builds in the root module,
// whose go.sum holds the worker's own dependencies (from tools/, a test's
// directory, the tools module's go.sum would not).
func buildWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/exactlyonce/exactly").Output()
	if err != nil {
		return "", fmt.Errorf("cannot find the root module: %w", err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/worker")
	build.Dir = strings.TrimSpace(string(root))
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cannot build the worker: %w\n%s", err, out)
	}
	return bin, nil
}

// workerProc is one running `worker run` process.
type workerProc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error // set before exited is closed

	mu   sync.Mutex
	tail []string // last stderr lines, for errors
}

const metricsLine = "serving /healthz, /readyz and /metrics"

// startWorker starts bin with args (which must include --metrics-addr
// 127.0.0.1:0 and --log-format json) and waits up to wait until it
// serves /metrics.
func startWorker(ctx context.Context, bin string, args []string, wait time.Duration) (*workerProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		cmd.Env = append(cmd.Env, "AWS_REGION=us-east-1")
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		cmd.Env = append(cmd.Env, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the worker: %w", err)
	}
	w := &workerProc{cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			w.mu.Lock()
			w.tail = append(w.tail, line)
			if len(w.tail) > 40 {
				w.tail = w.tail[1:]
			}
			w.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == metricsLine {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		<-scanned
		w.err = cmd.Wait()
		close(w.exited)
	}()
	select {
	case w.addr = <-addr:
		return w, nil
	case <-w.exited:
		return nil, fmt.Errorf("the worker exited at start-up (%w):\n%s", w.err, w.logTail())
	case <-time.After(wait):
		w.kill()
		return nil, fmt.Errorf("the worker did not serve /metrics within %s:\n%s", wait, w.logTail())
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	}
}

func (w *workerProc) logTail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, "\n")
}

var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// scrape reads the worker's /metrics.
func (w *workerProc) scrape(ctx context.Context) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.addr+"/metrics", nil)
	if err != nil {
		return Sample{}, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("cannot scrape the worker: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("scrape: %s", resp.Status)
	}
	s, err := parseMetrics(resp.Body, time.Now())
	if err != nil {
		return s, err
	}
	// The process's own CPU time and peak memory, read by the harness, so
	// that the worker and the hand-written consumer are measured alike.
	if cpu, rss, err := procStats(w.cmd.Process.Pid); err == nil {
		s.Counts["cpu_seconds"] = cpu
		s.Counts[peakRSS] = rss
	}
	return s, nil
}

// stop sends SIGTERM and waits for a clean exit; after timeout it kills.
func (w *workerProc) stop(timeout time.Duration) error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(timeout):
		w.kill()
		return fmt.Errorf("the worker did not exit within %s of SIGTERM", timeout)
	}
	var ee *exec.ExitError
	if errors.As(w.err, &ee) {
		return fmt.Errorf("the worker exited with %w:\n%s", w.err, w.logTail())
	}
	return w.err
}

func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	<-w.exited
}

// workerSource samples a set of worker processes.
type workerSource []*workerProc

func (ws workerSource) sample(ctx context.Context) (Sample, error) {
	ss := make([]Sample, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { ss[i], errs[i] = w.scrape(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Sample{}, err
	}
	return sum(ss), nil
}
