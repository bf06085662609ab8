package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// WorkerSpec is how to start one worker process.
type WorkerSpec struct {
	Bin string
	// Args of `worker run`; "{n}" in an argument becomes the slot number.
	Args []string
	// Env returns the environment of slot n's worker (1-based).
	Env func(n int) []string
	// LogDir receives one log file per worker life (w<slot>.<life>.log).
	LogDir string
	// ShutdownLimit bounds a graceful stop: the worker's shutdown timeout
	// plus a margin. A worker still running after it is killed.
	ShutdownLimit time.Duration
	// Partition cuts slot n's worker off the network (on) or heals it;
	// nil: no partitions.
	Partition func(n int, on bool)
	// Calm turns the error responses of slot n's proxies off (on) while
	// its worker stops gracefully, and back on; nil: nothing to calm.
	Calm func(n int, on bool)
}

// Action is one chaos action on a worker slot, with when it began and ended
// (a kill ends when it begins; an unexpected exit is a kill too).
type Action struct {
	Worker     string // slot: "w1"
	Kind       string // SIGKILL, SIGSTOP, partition, SIGTERM, exit
	Start, End time.Time
}

func (s *Supervisor) action(sl *slot, kind string, start time.Time) {
	s.mu.Lock()
	s.actions = append(s.actions, Action{Worker: fmt.Sprintf("w%d", sl.n), Kind: kind, Start: start, End: time.Now()})
	s.mu.Unlock()
}

// Actions returns the chaos actions so far.
func (s *Supervisor) Actions() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Action(nil), s.actions...)
}

// Supervisor runs a fixed number of worker slots. Each slot holds one worker
// process at a time (a "life"); the chaos loop kills, stalls and stops them,
// and restarts them.
type Supervisor struct {
	spec  WorkerSpec
	logf  func(format string, args ...any)
	slots []*slot

	mu       sync.Mutex
	stopping bool
	events   map[string]int
	stops    []Stop
	exits    []string // unexpected exits
	actions  []Action
	dead     map[string]float64 // metrics of ended lives, as last scraped
	errs     map[string]int     // ERROR log lines by message, over all lives
	restarts sync.WaitGroup
}

type slot struct {
	n    int
	life int
	p    *proc
	busy bool // a chaos action is on it
}

// proc is one worker process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed after Wait
	code    int           // exit code; -1 when ended by a signal
	signal  string        // the signal that ended it, if any
	lastLog string        // last log line, for unexpected exits

	mu       sync.Mutex
	addr     string // metrics address, once it listens
	expected bool   // the supervisor ended it
	metrics  map[string]float64
}

// NewSupervisor prepares n slots; Start starts them.
func NewSupervisor(spec WorkerSpec, n int, logf func(string, ...any)) *Supervisor {
	s := &Supervisor{spec: spec, logf: logf, events: map[string]int{}, dead: map[string]float64{}, errs: map[string]int{}}
	for i := range n {
		s.slots = append(s.slots, &slot{n: i + 1})
	}
	return s
}

// Start starts every slot's worker and waits until each serves its metrics
// (start-up checks done), for at most timeout.
func (s *Supervisor) Start(ctx context.Context, timeout time.Duration) error {
	for _, sl := range s.slots {
		if err := s.startSlot(sl); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(timeout)
	for _, sl := range s.slots {
		for {
			p := s.current(sl)
			if p != nil && p.metricsAddr() != "" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("worker %d did not start within %s (log: %s)", sl.n, timeout, s.logPath(sl.n, sl.life))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func (s *Supervisor) logPath(n, life int) string {
	return filepath.Join(s.spec.LogDir, fmt.Sprintf("w%d.%d.log", n, life))
}

func (s *Supervisor) current(sl *slot) *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sl.p
}

// startSlot starts a new life in sl.
func (s *Supervisor) startSlot(sl *slot) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil
	}
	sl.life++
	life := sl.life
	s.mu.Unlock()
	logFile, err := os.Create(s.logPath(sl.n, life))
	if err != nil {
		return fmt.Errorf("cannot create worker log: %w", err)
	}
	args := make([]string, len(s.spec.Args))
	for i, a := range s.spec.Args {
		args[i] = strings.ReplaceAll(a, "{n}", strconv.Itoa(sl.n))
	}
	cmd := exec.Command(s.spec.Bin, args...)
	cmd.Env = s.spec.Env(sl.n)
	cmd.Stdout = logFile
	cmd.SysProcAttr = procAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return err
	}
	p := &proc{name: fmt.Sprintf("w%d.%d", sl.n, life), cmd: cmd, done: make(chan struct{}), metrics: map[string]float64{}}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("cannot start worker %s: %w", p.name, err)
	}
	p.started = time.Now()
	s.mu.Lock()
	sl.p = p
	if life > 1 {
		s.events["restart"]++
	}
	s.mu.Unlock()
	go func() {
		s.readLog(p, stderr, logFile)
		err := cmd.Wait()
		logFile.Close()
		p.code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.signal = ws.Signal().String()
		}
		if err != nil && p.code == 0 {
			p.code = -1 // Wait failed without an exit status
		}
		close(p.done)
		s.ended(sl, p)
	}()
	return nil
}

// readLog copies the worker's JSON log to its file and picks out what the
// supervisor needs: the metrics address and ERROR lines.
func (s *Supervisor) readLog(p *proc, r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		w.Write(line)
		w.Write([]byte{'\n'})
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Addr  string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) != nil {
			p.mu.Lock()
			p.lastLog = string(line)
			p.mu.Unlock()
			continue
		}
		p.mu.Lock()
		p.lastLog = string(line)
		if rec.Msg == "serving /healthz, /readyz and /metrics" && p.addr == "" {
			p.addr = rec.Addr
		}
		p.mu.Unlock()
		if rec.Level == "ERROR" {
			s.mu.Lock()
			s.errs[rec.Msg]++
			s.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func (p *proc) metricsAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// ended is called once a life's process has exited.
func (s *Supervisor) ended(sl *slot, p *proc) {
	// Lock order: s.mu, then p.mu.
	s.mu.Lock()
	defer s.mu.Unlock()
	p.mu.Lock()
	expected, last := p.expected, p.lastLog
	for k, v := range p.metrics {
		s.dead[k] += v
	}
	p.metrics = map[string]float64{}
	p.mu.Unlock()
	if expected {
		return
	}
	s.events["unexpected exit"]++
	s.actions = append(s.actions, Action{Worker: fmt.Sprintf("w%d", sl.n), Kind: "exit", Start: time.Now(), End: time.Now()})
	how := fmt.Sprintf("exit code %d", p.code)
	if p.signal != "" {
		how = "signal " + p.signal
	}
	s.exits = append(s.exits, fmt.Sprintf("%s: %s after %s; last log line: %s", p.name, how, time.Since(p.started).Round(time.Millisecond), last))
	if s.stopping {
		return
	}
	s.logf("worker %s exited on its own (%s); restarting it", p.name, how)
	s.restarts.Go(func() {
		time.Sleep(time.Second)
		if err := s.startSlot(sl); err != nil {
			s.logf("cannot restart worker %d: %v", sl.n, err)
		}
	})
}

func (s *Supervisor) signal(p *proc, sig syscall.Signal, expected bool) error {
	if expected {
		p.mu.Lock()
		p.expected = true
		p.mu.Unlock()
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL to slot sl's worker and starts a new one after delay.
func (s *Supervisor) Kill(sl *slot, delay time.Duration) {
	p := s.current(sl)
	if p == nil {
		return
	}
	s.count("SIGKILL")
	s.logf("SIGKILL %s", p.name)
	s.action(sl, "SIGKILL", time.Now())
	if err := s.signal(p, syscall.SIGKILL, true); err != nil {
		s.logf("SIGKILL %s: %v", p.name, err)
	}
	<-p.done
	time.Sleep(delay)
	if err := s.startSlot(sl); err != nil {
		s.logf("cannot restart worker %d: %v", sl.n, err)
	}
}

// Stall freezes slot sl's worker with SIGSTOP for d (or until ctx ends),
// then lets it go on with SIGCONT: a worker that froze past its lease.
func (s *Supervisor) Stall(ctx context.Context, sl *slot, d time.Duration) {
	p := s.current(sl)
	if p == nil {
		return
	}
	s.count("SIGSTOP")
	s.logf("SIGSTOP %s for %s", p.name, d)
	start := time.Now()
	if err := s.signal(p, syscall.SIGSTOP, false); err != nil {
		return
	}
	defer s.action(sl, "SIGSTOP", start)
	waitWhileUp(ctx, d, p)
	_ = s.signal(p, syscall.SIGCONT, false)
	s.logf("SIGCONT %s", p.name)
}

// waitWhileUp waits d, or less if ctx ends or p exits.
func waitWhileUp(ctx context.Context, d time.Duration, p *proc) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-p.done:
	}
}

// Partition cuts slot sl's worker off both emulators for d (or until ctx
// ends): it keeps running, its requests and responses wait, and then go
// through at once, as when a network partition heals.
func (s *Supervisor) Partition(ctx context.Context, sl *slot, d time.Duration) {
	p := s.current(sl)
	if p == nil || s.spec.Partition == nil {
		return
	}
	s.count("partition")
	s.logf("partition %s for %s", p.name, d)
	defer s.action(sl, "partition", time.Now())
	s.spec.Partition(sl.n, true)
	waitWhileUp(ctx, d, p)
	s.spec.Partition(sl.n, false)
	s.logf("heal %s", p.name)
}

// Term stops slot sl's worker with SIGTERM, records how it went, and starts
// a new one when restart is set.
func (s *Supervisor) Term(sl *slot, restart bool) {
	p := s.current(sl)
	if p == nil {
		return
	}
	// A process that has not installed its signal handlers yet dies of
	// SIGTERM's default action: wait until it serves its metrics (start-up
	// done), as an orchestrator's health check would.
	deadline := time.Now().Add(30 * time.Second)
	for p.metricsAddr() == "" && time.Now().Before(deadline) {
		select {
		case <-p.done:
			deadline = time.Time{} // it ended: nothing to wait for
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.count("SIGTERM")
	s.logf("SIGTERM %s", p.name)
	if s.spec.Calm != nil {
		// The shutdown check measures the worker's shutdown, not the SDK's
		// backoff after a burst of errors (up to seconds per request).
		s.spec.Calm(sl.n, true)
		defer s.spec.Calm(sl.n, false)
	}
	start := time.Now()
	if err := s.signal(p, syscall.SIGTERM, true); err != nil {
		s.logf("SIGTERM %s: %v", p.name, err)
	}
	// A worker frozen by a stall cannot take the signal; SIGCONT is
	// harmless otherwise.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	stop := Stop{Worker: p.name, Limit: s.spec.ShutdownLimit}
	select {
	case <-p.done:
		stop.ExitCode = p.code
	case <-time.After(s.spec.ShutdownLimit + 5*time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		stop.ExitCode = -1
	}
	stop.Took = time.Since(start)
	s.action(sl, "SIGTERM", start)
	s.mu.Lock()
	s.stops = append(s.stops, stop)
	s.mu.Unlock()
	s.logf("%s stopped: exit code %d after %s", p.name, stop.ExitCode, stop.Took.Round(time.Millisecond))
	if restart {
		if err := s.startSlot(sl); err != nil {
			s.logf("cannot restart worker %d: %v", sl.n, err)
		}
	}
}

func (s *Supervisor) count(event string) {
	s.mu.Lock()
	s.events[event]++
	s.mu.Unlock()
}

// StopAll stops every worker with SIGTERM, in parallel, and waits.
func (s *Supervisor) StopAll() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.restarts.Wait()
	s.Scrape()
	var wg sync.WaitGroup
	for _, sl := range s.slots {
		p := s.current(sl)
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			continue
		default:
		}
		wg.Go(func() { s.Term(sl, false) })
	}
	wg.Wait()
}

// KillAll ends every worker at once (the harness is failing or interrupted).
func (s *Supervisor) KillAll() {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	for _, sl := range s.slots {
		if p := s.current(sl); p != nil {
			_ = s.signal(p, syscall.SIGKILL, true)
			<-p.done
		}
	}
	s.restarts.Wait()
}

// ChaosConfig shapes the chaos loop.
type ChaosConfig struct {
	Every        time.Duration // mean time between actions
	Stall        time.Duration // how long a SIGSTOP or a partition lasts
	Terms        int           // graceful stops (SIGTERM, then a restart) during the run
	TermAt       time.Duration // not before this much time into the chaos
	KillPct      float64       // percent of the other actions that are SIGKILL
	PartitionPct float64       // percent that are partitions; the rest are SIGSTOP
}

// Chaos acts on the workers until ctx ends, then waits for actions under
// way (a stall ends early). It leaves at least one worker alone at any time.
// With KillPct above 0, the first action (after any due SIGTERM) is a kill,
// so that a short run cannot miss the crash path by chance.
func (s *Supervisor) Chaos(ctx context.Context, cfg ChaosConfig, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	start := time.Now()
	terms, kills := 0, 0
	var actions sync.WaitGroup
	defer actions.Wait()
	for {
		wait := cfg.Every/2 + time.Duration(rng.Int64N(int64(cfg.Every)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sl := s.pickIdle(rng)
		if sl == nil {
			continue
		}
		var act func()
		switch {
		case terms < cfg.Terms && time.Since(start) >= cfg.TermAt:
			terms++
			act = func() { s.Term(sl, true) }
		default:
			x := rng.Float64() * 100
			if kills == 0 && cfg.KillPct > 0 {
				x = 0 // the first action kills: every run with kills has one
			}
			switch {
			case x < cfg.KillPct:
				kills++
				delay := 200*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
				act = func() { s.Kill(sl, delay) }
			case x < cfg.KillPct+cfg.PartitionPct:
				act = func() { s.Partition(ctx, sl, cfg.Stall) }
			default:
				act = func() { s.Stall(ctx, sl, cfg.Stall) }
			}
		}
		actions.Go(func() {
			defer s.release(sl)
			act()
		})
	}
}

// pickIdle marks and returns a random slot with a live worker and no action
// under way, provided another such slot stays untouched.
func (s *Supervisor) pickIdle(rng *rand.Rand) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	var idle []*slot
	for _, sl := range s.slots {
		if sl.busy || sl.p == nil {
			continue
		}
		select {
		case <-sl.p.done:
			continue
		default:
		}
		idle = append(idle, sl)
	}
	if len(idle) < 2 {
		return nil
	}
	sl := idle[rng.IntN(len(idle))]
	sl.busy = true
	return sl
}

func (s *Supervisor) release(sl *slot) {
	s.mu.Lock()
	sl.busy = false
	s.mu.Unlock()
}

// Up returns the number of live workers.
func (s *Supervisor) Up() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sl := range s.slots {
		if sl.p == nil {
			continue
		}
		select {
		case <-sl.p.done:
		default:
			n++
		}
	}
	return n
}

// Scrape reads /metrics of every live worker and keeps the exactly_*_total
// counters of each life. A worker frozen by SIGSTOP does not answer in time
// and keeps its previous values.
func (s *Supervisor) Scrape() {
	client := &http.Client{Timeout: 700 * time.Millisecond}
	var wg sync.WaitGroup
	for _, sl := range s.slots {
		p := s.current(sl)
		if p == nil || p.metricsAddr() == "" {
			continue
		}
		wg.Go(func() {
			m, err := scrape(client, "http://"+p.metricsAddr()+"/metrics")
			if err != nil {
				return
			}
			p.mu.Lock()
			select {
			case <-p.done: // ended meanwhile: its metrics were already counted
			default:
				p.metrics = m
			}
			p.mu.Unlock()
		})
	}
	wg.Wait()
	client.CloseIdleConnections()
}

// ScrapeEvery scrapes until ctx ends.
func (s *Supervisor) ScrapeEvery(ctx context.Context, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Scrape()
		}
	}
}

func scrape(c *http.Client, url string) (map[string]float64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics sums the Prometheus text format's exactly_*_total samples
// over their labels; exactly_aws_requests_total keeps its labels.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "exactly_") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			if name[:i] == "exactly_aws_requests_total" {
				name = "aws " + awsLabels(name[i:])
			} else {
				name = name[:i]
			}
		}
		if !strings.HasSuffix(name, "_total") && !strings.HasPrefix(name, "aws ") {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// awsLabels turns {operation="PutItem",service="DynamoDB"} into "DynamoDB PutItem".
func awsLabels(l string) string {
	var op, svc string
	for _, kv := range strings.Split(strings.Trim(l, "{}"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "operation":
			op = v
		case "service":
			svc = v
		}
	}
	return svc + " " + op
}

// Summary is what the supervisor saw.
type Summary struct {
	Events  map[string]int
	Stops   []Stop
	Exits   []string
	Metrics map[string]float64 // summed over every life, as last scraped
	Errors  map[string]int     // ERROR log lines by message
}

// Summary returns the events, stops and metrics so far.
func (s *Supervisor) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := Summary{Events: map[string]int{}, Metrics: map[string]float64{}, Errors: map[string]int{}}
	for k, v := range s.events {
		sum.Events[k] = v
	}
	for k, v := range s.errs {
		sum.Errors[k] = v
	}
	for k, v := range s.dead {
		sum.Metrics[k] += v
	}
	for _, sl := range s.slots {
		if sl.p == nil {
			continue
		}
		sl.p.mu.Lock()
		for k, v := range sl.p.metrics {
			sum.Metrics[k] += v
		}
		sl.p.mu.Unlock()
	}
	sum.Stops = append(sum.Stops, s.stops...)
	sum.Exits = append(sum.Exits, s.exits...)
	return sum
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
