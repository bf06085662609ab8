package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/outbox"
)

// chainStage is the second half of a ledger run's chain: the ledger
// workers confirm each deposit through an outbox table, in the same
// transaction as the deposit; relay processes (`worker relay`) publish the
// confirmations to a second queue; a second set of workers applies them to
// a second ledger. Relays and second-stage workers run behind fault
// proxies of their own and take the same chaos actions as the first stage.
// The verdict: the second ledger equals the first, account by account
// (balance, deposits applied, last seq: each confirmation applied once, in
// order), its DLQ is empty and nothing is left in the outbox.
type chainStage struct {
	outboxTable, ledger2   string
	confirmURL, confirmDLQ string
	relays, workers        *Supervisor
	proxies                []*proxyPairs
}

// chainRelays and chainWorkers are the processes of the second half.
const (
	chainRelays  = 2
	chainWorkers = 2
)

func setupChain(ctx context.Context, cfg Config, bin, id string, env []string) (*chainStage, error) {
	c := &chainStage{outboxTable: "chaos-" + id + "-outbox", ledger2: "chaos-" + id + "-ledger2"}
	setup := exec.CommandContext(ctx, bin, "setup", "--queue", "chaos-"+id+"-confirm.fifo", "--dlq", "chaos-"+id+"-confirm-dlq.fifo",
		"--max-receive", fmt.Sprint(cfg.MaxReceive), "--visibility", cfg.Visibility.String(),
		"--outbox-table", c.outboxTable, "--ledger-table", c.ledger2)
	setup.Env = env
	out, err := setup.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("worker setup (the chain) failed: %w\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			switch f[0] {
			case "queue":
				c.confirmURL = f[1]
			case "dlq":
				c.confirmDLQ = f[1]
			}
		}
	}
	if c.confirmURL == "" || c.confirmDLQ == "" {
		return nil, fmt.Errorf("worker setup printed no confirmation queue URLs:\n%s", out)
	}
	return c, nil
}

// stageOneArgs are the flags that make the ledger workers confirm.
func (c *chainStage) stageOneArgs() []string {
	return []string{"--outbox-table", c.outboxTable, "--ledger-confirm-queue", c.confirmURL}
}

func (c *chainStage) cleanup(ctx context.Context, sqsc *sqs.Client, db *dynamodb.Client) {
	for _, u := range []string{c.confirmURL, c.confirmDLQ} {
		_, _ = sqsc.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
	}
	for _, t := range []string{c.outboxTable, c.ledger2} {
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
	}
}

// start starts the relays and the second-stage workers, each slot behind
// its own pair of fault proxies.
func (c *chainStage) start(ctx context.Context, cfg Config, sh shared, seed uint64, dir string, tracer *Tracer, rates FaultRates, tableArg string, logf func(string, ...any)) error {
	baseEnv := workerEnv(os.Environ())
	spec := func(args []string, prefix string, n int, salt uint64, sub string) (WorkerSpec, error) {
		px, err := newProxyPairs(sh, cfg, tracer, rates, seed^salt, prefix, n)
		if err != nil {
			return WorkerSpec{}, err
		}
		c.proxies = append(c.proxies, px)
		logDir := filepath.Join(dir, sub)
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return WorkerSpec{}, err
		}
		return px.wire(WorkerSpec{Bin: sh.bin, Args: args, LogDir: logDir, ShutdownLimit: cfg.ShutdownTimeout + 3*time.Second}, baseEnv, nil), nil
	}
	rs, err := spec([]string{"relay", "--outbox-table", c.outboxTable, "--poll", "1s", "--metrics-addr", "127.0.0.1:0",
		"--log-format", "json", "--log-level", cfg.LogLevel}, "r", chainRelays, 0x7e1a, "relay")
	if err != nil {
		return err
	}
	ws, err := spec([]string{"run", "--queue", c.confirmURL, "--table", tableArg, "--effect", EffectName, "--ledger-table", c.ledger2,
		"--lease", cfg.Lease.String(), "--visibility", cfg.Visibility.String(), "--concurrency", fmt.Sprint(cfg.Concurrency),
		"--shutdown-timeout", cfg.ShutdownTimeout.String(), "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
		"--log-level", cfg.LogLevel, "--progress", "0"}, "c", chainWorkers, 0xc0f1, "confirmed")
	if err != nil {
		return err
	}
	c.relays = NewSupervisor(rs, chainRelays, func(f string, a ...any) { logf("relay: "+f, a...) })
	c.workers = NewSupervisor(ws, chainWorkers, func(f string, a ...any) { logf("confirmations: "+f, a...) })
	for _, s := range []*Supervisor{c.relays, c.workers} {
		if err := s.Start(ctx, time.Minute); err != nil {
			c.kill()
			return err
		}
	}
	logf("chain: %d relays and %d confirmation workers up (outbox %s, queue %s)", chainRelays, chainWorkers, c.outboxTable, c.confirmURL)
	return nil
}

// chaos acts on the relays and the second-stage workers until ctx ends.
func (c *chainStage) chaos(ctx context.Context, cfg Config, seed uint64) {
	done := make(chan struct{}, 2)
	for i, s := range []*Supervisor{c.relays, c.workers} {
		go func() {
			defer func() { done <- struct{}{} }()
			s.Chaos(ctx, ChaosConfig{Every: 2 * cfg.ChaosEvery, Stall: cfg.Stall, KillPct: cfg.KillPct, PartitionPct: cfg.PartitionPct}, seed^uint64(0xc4a1+i))
		}()
	}
	<-done
	<-done
}

// wait waits until the outbox holds nothing to publish and the
// confirmation queue has stayed empty for three polls, or timeout.
func (c *chainStage) wait(ctx context.Context, sqsc *sqs.Client, db *dynamodb.Client, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for quiet := 0; quiet < 3; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Second)
		pending, err := outbox.ListPending(ctx, db, c.outboxTable, 1)
		if err != nil || len(pending) > 0 {
			quiet = 0
			continue
		}
		q, err := Counts(ctx, sqsc, c.confirmURL)
		if err != nil || q.Total() > 0 {
			quiet = 0
			continue
		}
		quiet++
	}
	return true
}

func (c *chainStage) stop() {
	c.relays.StopAll()
	c.workers.StopAll()
}

func (c *chainStage) kill() {
	if c.relays != nil {
		c.relays.KillAll()
	}
	if c.workers != nil {
		c.workers.KillAll()
	}
}

func (c *chainStage) close() {
	for _, p := range c.proxies {
		p.close()
	}
}

// verify compares the second ledger with the first.
func (c *chainStage) verify(ctx context.Context, sqsc *sqs.Client, db *dynamodb.Client, first []Account) ([]Row, []string, error) {
	second, _, err := ReadLedger(ctx, db, c.ledger2)
	if err != nil {
		return nil, nil, err
	}
	dlq, err := DrainDLQ(ctx, sqsc, c.confirmDLQ)
	if err != nil {
		return nil, nil, err
	}
	pending, err := outbox.ListPending(ctx, db, c.outboxTable, 100)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]Account{}
	for _, a := range second {
		byName[a.Name] = a
	}
	var problems []string
	same := 0
	for _, a := range first {
		b, ok := byName[a.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("chain: account %s has no confirmation applied", a.Name))
		case b.Balance != a.Balance || b.Applied != a.Applied || b.LastSeq != a.LastSeq:
			problems = append(problems, fmt.Sprintf("chain: account %s confirmed balance %d, %d applied, last seq %d; the deposits: %d, %d, %d",
				a.Name, b.Balance, b.Applied, b.LastSeq, a.Balance, a.Applied, a.LastSeq))
		default:
			same++
		}
		delete(byName, a.Name)
	}
	extra := make([]string, 0, len(byName))
	for name := range byName {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		problems = append(problems, "chain: confirmations applied to account "+name+", which has no deposit")
	}
	for _, m := range dlq {
		problems = append(problems, "chain: confirmation dead-lettered: "+m.Body)
	}
	for _, it := range pending {
		problems = append(problems, fmt.Sprintf("chain: confirmation %s still in the outbox", it.ID))
	}
	rows := []Row{
		{Metric: "chain: accounts whose confirmations equal their deposits", Expected: fmt.Sprint(len(first)), Actual: fmt.Sprint(same), OK: same == len(first) && len(extra) == 0},
		{Metric: "chain: confirmations dead-lettered", Expected: "0", Actual: fmt.Sprint(len(dlq)), OK: len(dlq) == 0},
		{Metric: "chain: confirmations left in the outbox", Expected: "0", Actual: fmt.Sprint(len(pending)), OK: len(pending) == 0},
	}
	return rows, problems, nil
}

// proxyPairs are the fault proxies between worker processes and the
// emulators: one for SQS and one for DynamoDB per worker slot, named
// <prefix><slot> in the trace.
type proxyPairs struct{ sqs, ddb []*Proxy }

func newProxyPairs(sh shared, cfg Config, tracer *Tracer, rates FaultRates, seed uint64, prefix string, n int) (*proxyPairs, error) {
	px := &proxyPairs{}
	for i := range n {
		w := fmt.Sprintf("%s%d", prefix, i+1)
		sp, err := NewProxy("sqs", sh.sqsHost, MixedFaults(seed^uint64(0x5153+i), rates), tracer.Observer(w, "sqs"))
		if err != nil {
			px.close()
			return nil, err
		}
		px.sqs = append(px.sqs, sp)
		dp, err := NewProxy("dynamodb", sh.ddbHost, MixedFaults(seed^uint64(0xdd80+i), rates), tracer.Observer(w, "dynamodb"))
		if err != nil {
			px.close()
			return nil, err
		}
		px.ddb = append(px.ddb, dp)
		sp.SetSlow(cfg.SlowFor)
		dp.SetSlow(cfg.SlowFor)
	}
	return px, nil
}

// all lists the proxies, SQS's first.
func (px *proxyPairs) all() []*Proxy { return append(slices.Clone(px.sqs), px.ddb...) }

func (px *proxyPairs) close() {
	for _, p := range px.all() {
		p.Close()
	}
}

// wire points spec's workers at their slot's proxies: their environment
// (base, the slot's endpoints, then what extra adds, when set), calming and
// partitions.
func (px *proxyPairs) wire(spec WorkerSpec, base []string, extra func(n int) []string) WorkerSpec {
	spec.Env = func(n int) []string {
		env := append(append([]string(nil), base...),
			"AWS_ENDPOINT_URL_SQS="+px.sqs[n-1].URL(), "AWS_ENDPOINT_URL_DYNAMODB="+px.ddb[n-1].URL())
		if extra != nil {
			env = append(env, extra(n)...)
		}
		return env
	}
	spec.Calm = func(n int, on bool) {
		px.sqs[n-1].Calm(on)
		px.ddb[n-1].Calm(on)
	}
	spec.Partition = func(n int, on bool) {
		for _, p := range []*Proxy{px.sqs[n-1], px.ddb[n-1]} {
			if on {
				p.Partition()
			} else {
				p.Heal()
			}
		}
	}
	return spec
}
