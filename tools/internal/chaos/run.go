// Package chaos is the harness behind `make chaos`: it tries hard to make the
// worker double an effect, lose a message or break a group's order, and
// shows that it does not.
//
// A run does one chaos run per effect, side by side (-effect ledger,http):
// each creates a FIFO queue with a DLQ and the two tables, starts several
// worker processes (cmd/chaos/worker: the real worker plus an effect that can
// sleep past the visibility timeout) behind a TCP fault proxy per emulator,
// and sends N deposits over many groups with duplicates of both kinds and a
// few poison messages. Meanwhile it kills workers with SIGKILL, freezes
// them with SIGSTOP past their lease, cuts one off the network (its requests
// and responses held past the lease, then released at once), stops one with
// SIGTERM, and restarts them; the proxies reset connections, drop responses
// after the request went through, and answer some requests themselves, in
// short bursts, with 500/503, throttling errors and (TransactWriteItems)
// TransactionConflict cancellations. When the queue has drained it stops
// the workers and verifies what they left behind: for the ledger effect
// (transactional mode) the ledger, the dedup records and both queues (see
// Verify); for the http effect (claim mode) the calls a counting downstream
// received (see VerifyClaim). Every request that crossed a proxy is in
// trace.log, so a violation comes with the history of the messages involved.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/idleconns"
)

// Defaults of a run, sized for CI: a couple of minutes on a small machine.
const (
	DefaultN           = 1000
	DefaultExactPct    = 5
	DefaultRetryPct    = 5
	DefaultPoison      = 3
	DefaultWorkers     = 3
	DefaultConcurrency = 8
	DefaultVisibility  = 6 * time.Second
	DefaultLease       = 6 * time.Second
	// DefaultMaxReceive leaves room for the receives chaos costs a message
	// that never fails: a worker killed or frozen while holding it (and, as
	// the lease outlives the visibility by a few ms, a busy claim right
	// after), a hand-back behind a failure of its group, a lost
	// ReceiveMessage response (fauxqs ignores ReceiveRequestAttemptId). At
	// this chaos level innocent messages took up to 13 receives in
	// 5000-message runs (15 with -chaos-until-drained); the report prints
	// the distribution.
	DefaultMaxReceive      = 20
	DefaultShutdownTimeout = 4 * time.Second
	DefaultResetPct        = 2
	DefaultDropPct         = 2
	// Error responses the proxies answer themselves, in bursts of 1 to
	// DefaultBurst requests: a burst of 3 or more outlasts the SDK's three
	// attempts, so the worker's own retries are exercised too.
	Err5xxPctDefault     = 0.5
	DefaultThrottlePct   = 0.5
	DefaultTxConflictPct = 5 // of TransactWriteItems
	DefaultBurst         = 4
	DefaultSendRate      = 25               // messages a second, for the default -send-for
	DefaultMinSendFor    = 40 * time.Second // chaos needs time to happen
	DefaultChaosEvery    = 4 * time.Second
	DefaultKillPct       = 35
	DefaultPartitionPct  = 30
	DefaultTerms         = 1
	DefaultChaosTail     = 20 * time.Second
	// DefaultTimeout outlasts the worker's longest backoff (pool.DefaultRetryMax,
	// 5 min): a retry of a message with a high receive count, after a request
	// that failed every SDK attempt, hides it that long.
	DefaultTimeout = 7 * time.Minute
)

// Config of a run. Main fills it from flags. A zero N, Groups, Sleepers,
// SleepFor, Workers, Concurrency, Visibility, Lease, MaxReceive,
// ShutdownTimeout, SendFor, ChaosEvery, Stall, ChaosTail, Timeout or LogLevel
// takes its default; a zero percentage, Poison or Terms means none.
type Config struct {
	N        int     // logical deposits (each must be applied exactly once)
	Groups   int     // deposit groups, one ledger account each; 0: N/25, at least 4
	ExactPct float64 // percent of deposits resent with their dedup id (SQS drops them)
	RetryPct float64 // percent of deposits resent with a new dedup id and the same idempotency-key
	Poison   int     // poison messages, each in its own group
	Sleepers int     // deposits whose effect sleeps past the visibility timeout; 0: N/250, at least 2
	SleepFor time.Duration

	Workers         int
	Concurrency     int
	Visibility      time.Duration // the queue's visibility timeout, and --visibility
	Lease           time.Duration // --lease
	MaxReceive      int           // the redrive policy's maxReceiveCount
	ShutdownTimeout time.Duration // --shutdown-timeout

	ResetPct float64 // percent of requests whose connection is reset before forwarding
	DropPct  float64 // percent of requests forwarded whose response is dropped
	// Error responses answered by the proxies (never forwarded): percent of
	// requests that start a burst of 500/503, of throttling, and percent of
	// TransactWriteItems that start a burst of TransactionConflict
	// cancellations; Burst is the longest burst (1: none).
	Err5xxPct     float64
	ThrottlePct   float64
	TxConflictPct float64
	Burst         int
	// SlowPct is the percent of requests whose response the proxy holds
	// for SlowFor (0: lease + 2s) after the request took effect: a call
	// slow past the lease. Off by default.
	SlowPct float64
	SlowFor time.Duration

	SendFor      time.Duration // the producer spreads its sends over this long; 0: N/25 s, at least 40 s
	ChaosEvery   time.Duration // mean time between chaos actions
	Stall        time.Duration // how long a SIGSTOP or a partition lasts; 0: lease + visibility
	KillPct      float64       // percent of chaos actions that are SIGKILL
	PartitionPct float64       // percent that are network partitions; the rest are SIGSTOP
	Terms        int           // graceful stops (SIGTERM) during the run
	ChaosTail    time.Duration // chaos actions end this long after the last send; 0: 20s
	// ChaosUntilDrained keeps the chaos actions going until the queue has
	// drained: the stragglers of the run then take hit after hit, which
	// piles receives onto a few innocent messages and slows the drain.
	ChaosUntilDrained bool
	Timeout           time.Duration // after sending, how long the queue may take to drain

	// Effects to run, side by side, each against its own queue, tables and
	// workers: "ledger" (EffectName: optimistic mode on odd worker slots,
	// transactional on even ones; exactly-once) and
	// "http" (HTTPEffect: claim mode against a counting downstream). Empty:
	// both.
	Effects []string
	// AllowLateClaims counts claim mode's repeat calls on a claim that won
	// with its lease already over (a product bug) without failing the run.
	AllowLateClaims bool

	// NoChain runs the ledger without the outbox chain (chain.go): no
	// confirmations, relays or second stage.
	NoChain    bool
	NoSeq      bool   // deposits without seq (see PlanConfig.NoSeq)
	WorkerArgs string // more `worker run` flags, space-separated; "{n}" becomes the slot number
	LogLevel   string // the workers' --log-level; debug logs every message's outcome
	Seed       uint64 // 0: random; printed so that a run's plan and faults can be replayed
	Dir        string // logs and report; "" makes a temporary directory
	WorkerBin  string // a prebuilt tools/cmd/chaos/worker; "" builds it (from within the tools module)
	Keep       bool   // keep the queues and tables
}

func (c *Config) defaults() {
	c.N = orInt(c.N, DefaultN)
	c.Groups = orInt(c.Groups, max(4, c.N/25))
	c.Sleepers = orInt(c.Sleepers, max(2, c.N/250))
	c.Workers = orInt(c.Workers, DefaultWorkers)
	c.Concurrency = orInt(c.Concurrency, DefaultConcurrency)
	c.Visibility = orDur(c.Visibility, DefaultVisibility)
	c.Lease = orDur(c.Lease, DefaultLease)
	c.SleepFor = orDur(c.SleepFor, c.Visibility*3/2)
	c.MaxReceive = orInt(c.MaxReceive, DefaultMaxReceive)
	c.ShutdownTimeout = orDur(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.SendFor = orDur(c.SendFor, max(DefaultMinSendFor, time.Duration(c.N)*time.Second/DefaultSendRate))
	c.ChaosEvery = orDur(c.ChaosEvery, DefaultChaosEvery)
	c.Stall = orDur(c.Stall, c.Lease+c.Visibility)
	c.Timeout = orDur(c.Timeout, DefaultTimeout)
	c.ChaosTail = orDur(c.ChaosTail, DefaultChaosTail)
	c.SlowFor = orDur(c.SlowFor, c.Lease+2*time.Second)
	if c.LogLevel == "" {
		c.LogLevel = "debug"
	}
	if len(c.Effects) == 0 {
		c.Effects = []string{LedgerEffect, HTTPEffect}
	}
}

func orInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func orDur(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// UsageError is a bad flag or setting (exit code 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Parse reads the flags of `chaos`.
func Parse(args []string, stderr io.Writer) (Config, error) {
	c := Config{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.N, "n", DefaultN, "logical deposits to send; each must be applied exactly once")
	fs.IntVar(&c.Groups, "groups", 0, "message groups (one ledger account each); 0: n/25, at least 4")
	fs.Float64Var(&c.ExactPct, "exact-dups", DefaultExactPct, "percent of deposits resent with the same dedup id (inside SQS's window)")
	fs.Float64Var(&c.RetryPct, "retry-dups", DefaultRetryPct, "percent of deposits resent with a new dedup id and the same idempotency-key (after SQS's window)")
	fs.IntVar(&c.Poison, "poison", DefaultPoison, "poison messages (rejected by the ledger), each in its own group")
	fs.IntVar(&c.Sleepers, "sleepers", 0, "deposits whose effect sleeps past the visibility timeout; 0: n/250, at least 2")
	fs.DurationVar(&c.SleepFor, "sleep", 0, "how long a sleeper sleeps; 0: 1.5 x visibility")
	fs.IntVar(&c.Workers, "workers", DefaultWorkers, "worker processes")
	fs.IntVar(&c.Concurrency, "concurrency", DefaultConcurrency, "--concurrency of each worker")
	fs.DurationVar(&c.Visibility, "visibility", DefaultVisibility, "the queue's visibility timeout and the workers' --visibility")
	fs.DurationVar(&c.Lease, "lease", DefaultLease, "the workers' --lease")
	fs.IntVar(&c.MaxReceive, "max-receive", DefaultMaxReceive, "maxReceiveCount of the redrive policy (each worker crash costs a message it holds up to 2 receives)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "the workers' --shutdown-timeout")
	fs.Float64Var(&c.ResetPct, "reset", DefaultResetPct, "percent of worker requests whose connection is reset before it is forwarded")
	fs.Float64Var(&c.DropPct, "drop", DefaultDropPct, "percent of worker requests forwarded whose response is dropped (lost acknowledgement)")
	fs.Float64Var(&c.Err5xxPct, "err5xx", Err5xxPctDefault, "percent of worker requests that start a burst of HTTP 500/503 answered by the proxy (never forwarded)")
	fs.Float64Var(&c.ThrottlePct, "throttle", DefaultThrottlePct, "percent of worker requests that start a burst of throttling errors (DynamoDB ProvisionedThroughputExceededException/ThrottlingException, SQS RequestThrottled)")
	fs.Float64Var(&c.TxConflictPct, "tx-conflict", DefaultTxConflictPct, "percent of TransactWriteItems that start a burst of TransactionCanceledException [TransactionConflict] (not retried by the SDK)")
	fs.IntVar(&c.Burst, "burst", DefaultBurst, "longest burst of error responses, in requests (1: single errors)")
	fs.Float64Var(&c.SlowPct, "slow", 0, "percent of worker requests whose response is held for -slow-for after the request took effect (a call slow past the lease)")
	fs.DurationVar(&c.SlowFor, "slow-for", 0, "how long a -slow response is held; 0: lease + 2s")
	fs.DurationVar(&c.SendFor, "send-for", 0, "spread the sends over this long (0: n/25 s, at least 40s)")
	fs.DurationVar(&c.ChaosEvery, "chaos-every", DefaultChaosEvery, "mean time between chaos actions (SIGKILL, SIGSTOP, SIGTERM)")
	fs.DurationVar(&c.Stall, "stall", 0, "how long a SIGSTOP freezes a worker, or a partition cuts it off; 0: lease + visibility")
	fs.Float64Var(&c.KillPct, "kill-pct", DefaultKillPct, "percent of chaos actions that are SIGKILL")
	fs.Float64Var(&c.PartitionPct, "partition-pct", DefaultPartitionPct, "percent of chaos actions that are network partitions of one worker (its requests and responses held, then released); the rest are SIGSTOP")
	fs.IntVar(&c.Terms, "terms", DefaultTerms, "graceful stops (SIGTERM, then a restart) during the run")
	fs.DurationVar(&c.ChaosTail, "chaos-tail", DefaultChaosTail, "chaos actions end this long after the last send (the proxies' faults go on to the end)")
	fs.BoolVar(&c.ChaosUntilDrained, "chaos-until-drained", false, "keep the chaos actions going until the queue has drained (harsher on the last stragglers, slower)")
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "after the last send, how long the queue may take to drain")
	effects := fs.String("effect", "ledger,http", "effects to run side by side, comma-separated: ledger (optimistic mode on odd workers, transactional on even ones: exactly-once) and http (claim mode: a counting downstream; a repeat call only where a worker died or stalled between effect and commit)")
	fs.BoolVar(&c.AllowLateClaims, "allow-late-claims", false, "claim mode: count repeat calls made on a claim that won with its lease already over (a known worker bug) without failing the run")
	fs.BoolVar(&c.NoChain, "no-chain", false, "ledger: run without the outbox chain (the workers confirm each deposit through the outbox; relays publish; a second stage applies the confirmations to a second ledger, which must equal the first)")
	fs.BoolVar(&c.NoSeq, "no-seq", false, "deposits without seq: the ledger no longer refuses out-of-order or repeated seqs, so an order violation or a double is applied and shows in the entries")
	fs.StringVar(&c.WorkerArgs, "worker-args", "", "more `worker run` flags, space-separated; {n} becomes the worker slot (1..workers), e.g. '--receivers 1'")
	fs.StringVar(&c.LogLevel, "log-level", "debug", "the workers' --log-level (debug logs every message's outcome)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the plan, the faults and the chaos (0: random)")
	fs.StringVar(&c.Dir, "dir", "", "directory for worker logs and the report (default: a new temporary directory)")
	fs.StringVar(&c.WorkerBin, "worker-bin", "", "prebuilt tools/cmd/chaos/worker binary (default: go build it, from within the tools module)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the queues and tables after the run")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, &UsageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	c.Effects = nil
	seenEff := map[string]bool{}
	for _, e := range strings.Split(*effects, ",") {
		e = strings.TrimSpace(e)
		if e != LedgerEffect && e != HTTPEffect {
			return c, &UsageError{fmt.Sprintf("-effect %q: want ledger, http or ledger,http", *effects)}
		}
		if !seenEff[e] {
			seenEff[e] = true
			c.Effects = append(c.Effects, e)
		}
	}
	switch {
	case c.N < 1:
		return c, &UsageError{"-n must be at least 1"}
	case c.Workers < 2:
		return c, &UsageError{"-workers must be at least 2 (one stays untouched by every chaos action)"}
	case c.ResetPct < 0 || c.DropPct < 0 || c.Err5xxPct < 0 || c.ThrottlePct < 0 || c.SlowPct < 0 ||
		c.ResetPct+c.DropPct+c.Err5xxPct+c.ThrottlePct+c.SlowPct > 50:
		return c, &UsageError{"-reset, -drop, -err5xx, -throttle and -slow must be percentages that add up to at most 50"}
	case c.TxConflictPct < 0 || c.TxConflictPct > 50:
		return c, &UsageError{"-tx-conflict must be a percentage of at most 50"}
	case c.Burst < 0:
		return c, &UsageError{"-burst must not be negative"}
	case c.Visibility < 2*time.Second || c.Lease < 2*time.Second:
		return c, &UsageError{"-visibility and -lease must be at least 2s (the worker's minimum)"}
	case c.MaxReceive < 1:
		return c, &UsageError{"-max-receive must be at least 1"}
	case c.KillPct < 0 || c.PartitionPct < 0 || c.KillPct+c.PartitionPct > 100:
		return c, &UsageError{"-kill-pct and -partition-pct must be percentages that add up to at most 100"}
	}
	return c, nil
}

// Main runs `chaos` with args and returns the exit code: 0 when every check
// holds, 1 on a violation or an error, 2 on bad flags.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := Parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "chaos: "+ue.Msg)
		return 2
	}
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "chaos: "+err.Error())
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// Run does one chaos run, prints its progress and result to out and returns
// the verdict. An error means the run itself could not be carried out.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	cfg.defaults()
	if cfg.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			cfg.Seed = cfg.Seed<<8 | uint64(x)
		}
		cfg.Seed >>= 1 // printable as a positive flag value everywhere
	}
	began := time.Now()
	var (
		outMu  sync.Mutex
		events = io.Discard
	)
	logf := func(format string, args ...any) {
		now := time.Now()
		line := fmt.Sprintf(format, args...)
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, "%6.1fs  %s\n", now.Sub(began).Seconds(), line)
		fmt.Fprintf(events, "%s %s\n", now.Format("15:04:05.000"), line)
	}

	sqsURL, ddbURL := endpoint("SQS"), endpoint("DYNAMODB")
	if sqsURL == "" || ddbURL == "" {
		return Report{}, errors.New("AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_DYNAMODB (or AWS_ENDPOINT_URL) are not set: run it against the local stack (make chaos, or scripts/with-stack)")
	}
	sqsHost, err := hostPort(sqsURL)
	if err != nil {
		return Report{}, err
	}
	ddbHost, err := hostPort(ddbURL)
	if err != nil {
		return Report{}, err
	}

	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "exactly-chaos-"); err != nil {
			return Report{}, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return Report{}, err
	}
	ev, err := os.Create(filepath.Join(dir, "events.log"))
	if err != nil {
		return Report{}, err
	}
	defer ev.Close()
	outMu.Lock()
	events = ev
	outMu.Unlock()
	bin := cfg.WorkerBin
	if bin == "" {
		bin = filepath.Join(dir, "chaos-worker")
		defer os.Remove(bin) // tens of MB; the logs stay
		logf("building the chaos worker (tools/cmd/chaos/worker) into %s", dir)
		v := "dev"
		if b, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
			v = strings.TrimSpace(string(b))
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin,
			"-ldflags", "-X github.com/exactlyonce/exactly/worker.Version="+v, "github.com/exactlyonce/exactly/tools/cmd/chaos/worker")
		if b, err := cmd.CombinedOutput(); err != nil {
			return Report{}, fmt.Errorf("cannot build the chaos worker: %w\n%s", err, b)
		}
	}

	vout, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return Report{}, fmt.Errorf("%s version: %w", bin, err)
	}
	version := strings.TrimSpace(strings.TrimPrefix(string(vout), "worker "))

	var conns idleconns.Set
	defer conns.Close()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithHTTPClient(conns.Client()))
	if err != nil {
		return Report{}, fmt.Errorf("cannot load the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return Report{}, errors.New("no AWS region: set AWS_REGION")
	}
	sqsc := sqs.NewFromConfig(awsCfg)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })

	// One run per effect, side by side: each has its own queue, tables,
	// workers, proxies and directory, and its own verdict.
	sh := shared{bin: bin, version: version, sqsc: sqsc, db: db, sqsURL: sqsURL, ddbURL: ddbURL,
		sqsHost: sqsHost, ddbHost: ddbHost, began: began}
	type result struct {
		rep  Report
		text string
		err  error
	}
	results := make([]result, len(cfg.Effects))
	var wg sync.WaitGroup
	for i, eff := range cfg.Effects {
		wg.Go(func() {
			sub := dir
			if len(cfg.Effects) > 1 {
				sub = filepath.Join(dir, eff)
				if err := os.MkdirAll(sub, 0o755); err != nil {
					results[i].err = err
					return
				}
			}
			prefix := ""
			if len(cfg.Effects) > 1 {
				prefix = "[" + eff + "] "
			}
			elogf := func(format string, args ...any) { logf(prefix+format, args...) }
			results[i].rep, results[i].text, results[i].err = runEffect(ctx, cfg, eff, uint64(i), sub, sh, elogf)
		})
	}
	wg.Wait()
	verdict := Report{}
	var errs []error
	for i, r := range results {
		outMu.Lock()
		fmt.Fprint(out, r.text)
		outMu.Unlock()
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.Effects[i], r.err))
			continue
		}
		verdict.Rows = append(verdict.Rows, r.rep.Rows...)
		verdict.Problems = append(verdict.Problems, r.rep.Problems...)
		verdict.Keys = append(verdict.Keys, r.rep.Keys...)
	}
	if len(errs) > 0 {
		return verdict, errors.Join(errs...)
	}
	if len(cfg.Effects) > 1 {
		v := "PASS"
		if !verdict.OK() {
			v = "FAIL"
		}
		fmt.Fprintf(out, "\n== chaos %s: effects %s, %s in all; reports in %s\n", v, strings.Join(cfg.Effects, ","), time.Since(began).Round(100*time.Millisecond), dir)
	}
	return verdict, nil
}

// shared is what the runs of the effects share.
type shared struct {
	bin, version     string
	sqsc             *sqs.Client
	db               *dynamodb.Client
	sqsURL, ddbURL   string
	sqsHost, ddbHost string
	began            time.Time
}

// ledgerCommit is the commit mode of the ledger's worker slot n: optimistic
// on odd slots, transactional (claim first) on even ones.
func ledgerCommit(n int) string {
	if n%2 == 1 {
		return "optimistic"
	}
	return "transactional"
}

// runEffect does the run of one effect in dir: EffectName (the ledger,
// transactional mode) or HTTPEffect (claim mode, against a counting
// downstream). It returns the verdict and the report's text.
func runEffect(ctx context.Context, cfg Config, eff string, idx uint64, dir string, sh shared, logf func(string, ...any)) (Report, string, error) {
	bin, version, sqsc, db := sh.bin, sh.version, sh.sqsc, sh.db
	sqsURL, ddbURL, began := sh.sqsURL, sh.ddbURL, sh.began
	seed := cfg.Seed ^ idx*0x9e3779b97f4a7c15 // the effects' runs fault differently; the plan is the same
	out := &strings.Builder{}
	// Resources, created by the worker's own setup command (straight to the
	// emulators).
	id := newID()
	names := struct{ queue, dlq, table, ledger string }{
		"chaos-" + id + ".fifo", "chaos-" + id + "-dlq.fifo", "chaos-" + id + "-dedup", "chaos-" + id + "-ledger",
	}
	baseEnv := workerEnv(os.Environ())
	setup := exec.CommandContext(ctx, bin, "setup", "--queue", names.queue, "--dlq", names.dlq,
		"--max-receive", fmt.Sprint(cfg.MaxReceive), "--visibility", cfg.Visibility.String(),
		"--table", names.table, "--ledger-table", names.ledger)
	setup.Env = append(baseEnv, "AWS_ENDPOINT_URL_SQS="+sqsURL, "AWS_ENDPOINT_URL_DYNAMODB="+ddbURL)
	so, err := setup.CombinedOutput()
	if err != nil {
		return Report{}, "", fmt.Errorf("worker setup failed: %w\n%s", err, so)
	}
	urls := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(so)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			urls[f[0]] = f[1]
		}
	}
	queueURL, dlqURL := urls["queue"], urls["dlq"]
	if queueURL == "" || dlqURL == "" {
		return Report{}, "", fmt.Errorf("worker setup printed no queue URLs:\n%s", so)
	}
	cleanup := func() {
		if cfg.Keep {
			logf("kept queues %s, %s and tables %s, %s", names.queue, names.dlq, names.table, names.ledger)
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, u := range []string{queueURL, dlqURL} {
			_, _ = sqsc.DeleteQueue(cctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
		for _, t := range []string{names.table, names.ledger} {
			_, _ = db.DeleteTable(cctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
		}
	}
	defer cleanup()
	var chain *chainStage
	if eff == LedgerEffect && !cfg.NoChain {
		if chain, err = setupChain(ctx, cfg, bin, id, append(baseEnv, "AWS_ENDPOINT_URL_SQS="+sqsURL, "AWS_ENDPOINT_URL_DYNAMODB="+ddbURL)); err != nil {
			return Report{}, "", err
		}
		if !cfg.Keep {
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				chain.cleanup(cctx, sqsc, db)
			}()
		}
	}

	// Fault proxies between the workers and the emulators: a pair per worker
	// slot, so that the trace says which worker sent what.
	traceFile, err := os.Create(filepath.Join(dir, "trace.log"))
	if err != nil {
		return Report{}, "", err
	}
	defer traceFile.Close()
	tracer := NewTracer(traceFile)
	defer tracer.Flush()
	rates := FaultRates{ResetPct: cfg.ResetPct, DropPct: cfg.DropPct, Err5xPct: cfg.Err5xxPct, ThrotPct: cfg.ThrottlePct,
		TxPct: cfg.TxConflictPct, Burst: cfg.Burst, SlowPct: cfg.SlowPct}
	px, err := newProxyPairs(sh, cfg, tracer, rates, seed, "w", cfg.Workers)
	if err != nil {
		return Report{}, "", err
	}
	defer px.close()
	faults := func() (faulted, requests int64) {
		for _, p := range px.all() {
			n, by := p.Totals()
			requests += n
			faulted += n - by[Pass]
		}
		return faulted, requests
	}

	plan := NewPlan(PlanConfig{
		Deposits: cfg.N, Groups: cfg.Groups, ExactPct: cfg.ExactPct, RetryPct: cfg.RetryPct,
		Poison: cfg.Poison, Sleepers: cfg.Sleepers, SleepMS: cfg.SleepFor.Milliseconds(), NoSeq: cfg.NoSeq,
	}, cfg.Seed)
	fmt.Fprintf(out, "chaos: seed %d; %d deposits over %d groups, %d exact resends, %d retries, %d poison, %d sleepers (%s); "+
		"%d workers (concurrency %d, visibility %s, lease %s), maxReceiveCount %d; faults: %.1f%% reset, %.1f%% lost ack, "+
		"%.1f%% 5xx, %.1f%% throttling, %.1f%% of transactions TransactionConflict (bursts up to %d), %.1f%% slow (%s)\n",
		cfg.Seed, len(plan.Deposits), len(plan.Groups), plan.Count(ExactResend), plan.Count(Retry), len(plan.Poison),
		plan.Sleepers(), cfg.SleepFor, cfg.Workers, cfg.Concurrency, cfg.Visibility, cfg.Lease, cfg.MaxReceive, cfg.ResetPct, cfg.DropPct,
		cfg.Err5xxPct, cfg.ThrottlePct, cfg.TxConflictPct, max(cfg.Burst, 1), cfg.SlowPct, cfg.SlowFor)
	fmt.Fprintf(out, "chaos: effect %s; worker %s; queue %s; logs in %s\n", eff, version, names.queue, dir)
	if cfg.NoSeq || cfg.WorkerArgs != "" {
		fmt.Fprintf(out, "chaos: deposits without seq: %v; extra worker flags: %q\n", cfg.NoSeq, cfg.WorkerArgs)
	}

	effArgs := []string{"--effect", EffectName, "--ledger-table", names.ledger}
	if chain != nil {
		effArgs = append(effArgs, chain.stageOneArgs()...)
	}
	var down *Downstream
	if eff == HTTPEffect {
		if down, err = NewDownstream(); err != nil {
			return Report{}, "", err
		}
		defer down.Close()
		// {n}: each worker slot calls its own path, so that a call says who made it.
		effArgs = []string{"--effect", HTTPEffect, "--http-url", down.URL("w{n}")}
	}
	runArgs := []string{"run", "--queue", queueURL, "--table", names.table,
		"--lease", cfg.Lease.String(), "--visibility", cfg.Visibility.String(), "--concurrency", fmt.Sprint(cfg.Concurrency),
		"--shutdown-timeout", cfg.ShutdownTimeout.String(), "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
		"--log-level", cfg.LogLevel, "--progress", "0"}
	runArgs = append(append(runArgs, effArgs...), strings.Fields(cfg.WorkerArgs)...)
	sup := NewSupervisor(px.wire(WorkerSpec{
		Bin: bin, Args: runArgs, LogDir: dir, ShutdownLimit: cfg.ShutdownTimeout + 3*time.Second,
	}, baseEnv, func(n int) []string {
		if eff == LedgerEffect {
			// Both modes of the ledger on one queue and one table, as
			// during a deploy that switches them (a --commit in
			// WorkerArgs wins).
			return []string{"WORKER_COMMIT=" + ledgerCommit(n)}
		}
		return nil
	}), cfg.Workers, logf)
	if err := sup.Start(ctx, time.Minute); err != nil {
		sup.KillAll()
		return Report{}, "", err
	}
	logf("%d workers up", cfg.Workers)
	if chain != nil {
		defer chain.close()
		if err := chain.start(ctx, cfg, sh, seed, dir, tracer, rates, names.table, logf); err != nil {
			sup.KillAll()
			return Report{}, "", err
		}
	}
	chainChaosCtx, stopChainChaos := context.WithCancel(ctx)
	defer stopChainChaos()
	chainChaosDone := make(chan struct{})
	go func() {
		defer close(chainChaosDone)
		if chain != nil {
			chain.chaos(chainChaosCtx, cfg, seed)
		}
	}()

	// The run: producer, chaos and metrics side by side, until the queue
	// has drained.
	var (
		bg       sync.WaitGroup
		sent     atomic.Int64
		prodErr  error
		prodDone = make(chan struct{})
	)
	chaosCtx, stopChaos := context.WithCancel(ctx)
	scrapeCtx, stopScrape := context.WithCancel(context.Background())
	bg.Go(func() { sup.ScrapeEvery(scrapeCtx, time.Second) })
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		sup.Chaos(chaosCtx, ChaosConfig{
			Every: cfg.ChaosEvery, Stall: cfg.Stall, Terms: cfg.Terms, TermAt: cfg.SendFor / 3,
			KillPct: cfg.KillPct, PartitionPct: cfg.PartitionPct,
		}, seed)
	}()
	go func() {
		defer close(prodDone)
		prodErr = Produce(ctx, sqsc, queueURL, plan.Sends, cfg.SendFor, &sent)
		if prodErr != nil {
			return
		}
		logf("producer done: %d messages sent", sent.Load())
		if !cfg.ChaosUntilDrained {
			time.AfterFunc(cfg.ChaosTail, func() {
				if chaosCtx.Err() == nil {
					logf("chaos actions end (%s after the last send); the proxies' faults go on", cfg.ChaosTail)
					stopChaos()
				}
			})
		}
	}()
	sendStart := time.Now()
	drained, waitErr := waitDrained(ctx, sqsc, queueURL, dlqURL, len(plan.Poison), prodDone, cfg.SendFor+cfg.Timeout, logf, func() string {
		f, n := faults()
		return fmt.Sprintf("sent %d/%d, workers up %d, faults %d/%d requests", sent.Load(), len(plan.Sends), sup.Up(), f, n)
	})
	drainTook := time.Since(sendStart)
	stopChaos()
	<-chaosDone
	<-prodDone
	chainDrained := true
	if chain != nil && ctx.Err() == nil {
		logf("chain: waiting for the outbox and the confirmations to drain")
		chainDrained = chain.wait(ctx, sqsc, db, cfg.Timeout)
	}
	stopChainChaos()
	<-chainChaosDone
	if ctx.Err() != nil {
		if chain != nil {
			chain.kill()
		}
		sup.KillAll()
		stopScrape()
		bg.Wait()
		return Report{}, "", errors.New("interrupted")
	}
	logf("stopping the workers (SIGTERM)")
	sup.StopAll()
	if chain != nil {
		chain.stop()
		if !chainDrained {
			logf("chain: the outbox or the confirmations did not drain within %s: verifying what is there", cfg.Timeout)
		}
	}
	stopScrape()
	bg.Wait()
	if prodErr != nil {
		return Report{}, "", fmt.Errorf("producer: %w", prodErr)
	}
	if waitErr != nil {
		return Report{}, "", waitErr
	}
	if !drained {
		logf("the queue did not drain within %s after the sends: verifying what is there", cfg.Timeout)
	}

	// What the run left behind, read straight from the emulators.
	vctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o Observed
	if o.Accounts, o.Entries, err = ReadLedger(vctx, db, names.ledger); err != nil {
		return Report{}, "", err
	}
	if o.Records, err = ReadRecords(vctx, db, names.table); err != nil {
		return Report{}, "", err
	}
	if o.Queue, err = Counts(vctx, sqsc, queueURL); err != nil {
		return Report{}, "", err
	}
	if o.DLQ, err = Counts(vctx, sqsc, dlqURL); err != nil {
		return Report{}, "", err
	}
	if o.DLQMessages, err = DrainDLQ(vctx, sqsc, dlqURL); err != nil {
		return Report{}, "", err
	}
	sum := sup.Summary()
	o.Stops = sum.Stops
	var (
		rep     Report
		calls   []Call
		excused map[string]int
	)
	if down != nil {
		calls = down.Calls()
		rep, excused = VerifyClaim(plan, o, calls, Excuses(sup.Actions(), tracer.Marks), cfg.AllowLateClaims)
	} else {
		rep = Verify(plan, o)
	}
	if chain != nil {
		rows, problems, err := chain.verify(vctx, sqsc, db, o.Accounts)
		if err != nil {
			return Report{}, "", err
		}
		rep.Rows = append(rep.Rows, rows...)
		rep.Problems = append(rep.Problems, problems...)
	}

	px.close() // no more traffic: the trace is complete
	if chain != nil {
		chain.close()
	}
	_ = tracer.Flush()
	trace, _ := os.ReadFile(filepath.Join(dir, "trace.log"))
	if down != nil {
		// The downstream's calls, in the trace's format, so that a
		// violation's history shows them among the key's requests.
		cl := &strings.Builder{}
		for _, c := range calls {
			fmt.Fprintf(cl, "%s %s downstream call %s n=%d group=%s seq=%d status=%d\n",
				c.At.Format("15:04:05.000"), c.Worker, c.Key, c.N, c.Group, c.Seq, c.Status)
		}
		if err := os.WriteFile(filepath.Join(dir, "calls.log"), []byte(cl.String()), 0o644); err != nil {
			return rep, "", err
		}
		trace = append(trace, cl.String()...)
	}
	report := &strings.Builder{}
	writeReport(report, cfg, eff, version, plan, o, rep, sum, px.all(), string(trace), drainTook, time.Since(began), dir)
	if down != nil {
		writeCalls(report, plan, calls, excused)
	}
	fmt.Fprint(out, report.String())
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report.String()), 0o644); err != nil {
		return rep, out.String(), err
	}
	return rep, out.String(), nil
}

// waitDrained polls the queues until the producer is done and the queue has
// stayed empty for three polls with the poison messages in the DLQ (or empty
// for fifteen polls whatever the DLQ holds), or until timeout.
func waitDrained(ctx context.Context, c *sqs.Client, queueURL, dlqURL string, poison int, prodDone <-chan struct{},
	timeout time.Duration, logf func(string, ...any), status func() string) (bool, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	empty := 0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return false, nil
		case <-tick.C:
		}
		q, err := Counts(ctx, c, queueURL)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		d, err := Counts(ctx, c, dlqURL)
		if err != nil {
			return false, err
		}
		if i%5 == 4 {
			logf("queue %d visible, %d in flight; DLQ %d; %s", q.Visible, q.InFlight, d.Total(), status())
		}
		done := false
		select {
		case <-prodDone:
			done = true
		default:
		}
		if done && q.Total() == 0 {
			empty++
		} else {
			empty = 0
		}
		if (empty >= 3 && d.Total() >= int64(poison)) || empty >= 15 {
			logf("queue drained; DLQ %d", d.Total())
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
	}
}

// writeCalls adds claim mode's calls to a report.
func writeCalls(w io.Writer, plan Plan, calls []Call, excused map[string]int) {
	perKey := map[string]int{}
	poison := 0
	for _, c := range calls {
		if c.Status == 200 {
			perKey[c.Key]++
		} else {
			poison++
		}
	}
	hist := map[int]int{}
	maxN := 0
	for _, n := range perKey {
		hist[n]++
		maxN = max(maxN, n)
	}
	var hs []string
	for n := 1; n <= maxN; n++ {
		if hist[n] > 0 {
			hs = append(hs, fmt.Sprintf("%dx: %d", n, hist[n]))
		}
	}
	var ex []string
	for _, k := range sortedKeys(excused) {
		ex = append(ex, fmt.Sprintf("%s %d", k, excused[k]))
	}
	fmt.Fprintf(w, "downstream calls: %d (%d refused poison calls); keys by calls: %s\n", len(calls), poison, strings.Join(hs, ", "))
	if len(ex) > 0 {
		fmt.Fprintf(w, "repeat calls excused by: %s\n", strings.Join(ex, ", "))
	}
}

func writeReport(w io.Writer, cfg Config, eff, version string, plan Plan, o Observed, rep Report, sum Summary, proxies []*Proxy, trace string, drain, total time.Duration, dir string) {
	verdict := "PASS"
	if !rep.OK() {
		verdict = "FAIL"
	}
	mode := "ledger effect, optimistic and transactional modes"
	if eff == LedgerEffect && !cfg.NoChain {
		mode += ", outbox chain"
	}
	if eff == HTTPEffect {
		mode = "http effect, claim mode"
	}
	fmt.Fprintf(w, "\n== chaos %s (%s): n=%d, %d groups, seed %d, worker %s; sends over %s, drained %s after the first send, %s in all\n\n",
		verdict, mode, cfg.N, len(plan.Groups), cfg.Seed, version, cfg.SendFor, drain.Round(100*time.Millisecond), total.Round(100*time.Millisecond))
	WriteTable(w, rep.Rows)
	if len(rep.Problems) > 0 {
		fmt.Fprintln(w, "\nviolations:")
		for _, p := range rep.Problems {
			fmt.Fprintln(w, "  "+p)
		}
		for i, k := range rep.Keys {
			if i == 3 {
				fmt.Fprintf(w, "\n(histories of %d more keys: grep trace.log and the worker logs)\n", len(rep.Keys)-i)
				break
			}
			fmt.Fprintf(w, "\nhistory of %s (trace.log and calls.log: time, worker slot, fault, event; chaos actions in events.log):\n", k)
			for _, l := range History(trace, k, 80) {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}

	fmt.Fprintf(w, "\nsent: %d deposits, %d exact resends (SQS drops them), %d retries with a new dedup id (the ledger absorbs them), %d poison; %d sleepers of %s\n",
		plan.Count(Original), plan.Count(ExactResend), plan.Count(Retry), plan.Count(Poison), plan.Sleepers(), cfg.SleepFor)

	// Receive counts at the claim that completed each deposit: how close
	// the chaos pushed innocent messages to maxReceiveCount.
	hist := map[int]int{}
	maxRC := 0
	for _, d := range plan.Deposits {
		if r, ok := o.Records[d.Key]; ok && r.Status == "COMPLETED" {
			hist[r.Attempts]++
			maxRC = max(maxRC, r.Attempts)
		}
	}
	var hs []string
	for rc := 1; rc <= maxRC; rc++ {
		if hist[rc] > 0 {
			hs = append(hs, fmt.Sprintf("%d: %d", rc, hist[rc]))
		}
	}
	fmt.Fprintf(w, "receive count at the completing claim (maxReceiveCount %d): %s\n", cfg.MaxReceive, strings.Join(hs, ", "))

	fmt.Fprintln(w, "\nfaults injected between the workers and the emulators:")
	type tally struct {
		held     int64
		requests int64
		by       map[Fault]int64
		ops      map[string]map[Fault]int64
	}
	services := map[string]*tally{}
	for _, p := range proxies {
		t := services[p.name]
		if t == nil {
			t = &tally{by: map[Fault]int64{}, ops: map[string]map[Fault]int64{}}
			services[p.name] = t
		}
		t.held += p.Held()
		for _, c := range p.Stats() {
			t.requests += c.N
			t.by[c.Fault] += c.N
			if t.ops[c.Op] == nil {
				t.ops[c.Op] = map[Fault]int64{}
			}
			t.ops[c.Op][c.Fault] += c.N
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  emulator\trequests\treset\tlost ack\t500\t503\tthrottled\ttx conflict\tslow\theld by a partition\t")
	for _, name := range sortedKeys(services) {
		t := services[name]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, t.requests, t.by[Reset], t.by[LostAck],
			t.by[Err500], t.by[Err503], t.by[Throttle], t.by[TxConflict], t.by[Slow], t.held)
	}
	tw.Flush()
	for _, name := range sortedKeys(services) {
		var ops []string
		for _, op := range sortedKeys(services[name].ops) {
			f := services[name].ops[op]
			var parts []string
			for _, k := range Faults[1:] {
				if f[k] > 0 {
					parts = append(parts, fmt.Sprintf("%s %d", k, f[k]))
				}
			}
			if len(parts) > 0 {
				ops = append(ops, fmt.Sprintf("%s (%s)", op, strings.Join(parts, ", ")))
			}
		}
		if len(ops) > 0 {
			fmt.Fprintf(w, "  %s by operation: %s\n", name, strings.Join(ops, "; "))
		}
	}

	ex := Exercised(trace)
	fmt.Fprintln(w, "\npaths exercised (from trace.log):")
	for _, k := range []string{PathFencedCommit, PathHeldCommit, PathLostAckCommit, PathLostAckClaim, PathTakeover, PathBusy, PathDuplicate,
		PathLostAckDelete, PathLostReceive, PathDLQSendLost, PathOrderRefused, PathEntryExists,
		PathConflictCommit, PathErrorCommit, PathErrorClaim, PathErrorExtend, PathExpiredClaim, PathExpiredAnswer} {
		fmt.Fprintf(w, "  %-80s %d\n", k, ex[k])
	}

	fmt.Fprintln(w, "\nchaos actions:")
	var evs []string
	for _, k := range sortedKeys(sum.Events) {
		evs = append(evs, fmt.Sprintf("%s %d", k, sum.Events[k]))
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(evs, ", "))
	for _, s := range sum.Stops {
		fmt.Fprintf(w, "  SIGTERM %s: exit %d after %s\n", s.Worker, s.ExitCode, s.Took.Round(time.Millisecond))
	}
	for _, e := range sum.Exits {
		fmt.Fprintf(w, "  unexpected exit: %s\n", e)
	}

	fmt.Fprintln(w, "\nworkers' /metrics, summed over every worker life (as last scraped; a SIGKILL loses up to a second):")
	var ms []string
	for _, k := range sortedKeys(sum.Metrics) {
		if strings.HasPrefix(k, "aws ") {
			continue
		}
		ms = append(ms, fmt.Sprintf("%s %.0f", strings.TrimSuffix(strings.TrimPrefix(k, "exactly_"), "_total"), sum.Metrics[k]))
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(ms, ", "))
	if len(sum.Errors) > 0 {
		var es []string
		for _, k := range sortedKeys(sum.Errors) {
			es = append(es, fmt.Sprintf("%q %d", k, sum.Errors[k]))
		}
		fmt.Fprintf(w, "  ERROR log lines: %s\n", strings.Join(es, ", "))
	}
	fmt.Fprintf(w, "\nworker logs and this report: %s\n", dir)
}

// workerEnv is env without the variables the harness sets itself: AWS
// endpoints and the worker's WORKER_* settings (flags are given explicitly).
func workerEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_ENDPOINT_URL") || strings.HasPrefix(k, "WORKER_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// endpoint is the SDK's endpoint for service: AWS_ENDPOINT_URL_<SERVICE>,
// else AWS_ENDPOINT_URL.
func endpoint(service string) string {
	if v := os.Getenv("AWS_ENDPOINT_URL_" + service); v != "" {
		return v
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

func hostPort(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" {
		return "", fmt.Errorf("endpoint %q: want http://host:port (the local stack)", endpoint)
	}
	return u.Host, nil
}

func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
