package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// Regimes of a run.
const (
	// RegimeEmulator is the local emulators at their own speed, through the
	// SDK: what the consumers' own CPU (signing, serialisation) costs.
	RegimeEmulator = "emulator"
	// RegimeAWS is the in-memory fakes behind a layer that holds each call
	// for the AWS-like latency of Latencies: bound by latency, not by an
	// emulator's CPU. No SDK: its marshalling is in the emulator regime.
	RegimeAWS = "aws"
)

// Consumers a `bench consume` process runs.
const (
	ConsumerHandwritten = "handwritten" // receive 10, one transaction per message, one DeleteMessageBatch
	ConsumerWorker      = "worker"      // the library's worker, optimistic commit
	ConsumerGrouped     = "grouped"     // the same with group commit (GroupCommitWindow)
	ConsumerCarried     = "carried"     // the worker, carried commit: the ledger's entry carries the dedup record
	// The Lambda consumers run under a modelled event source mapping (esm),
	// aws regime only.
	ConsumerLambda            = "lambda"             // the library's LambdaHandler, optimistic commit
	ConsumerLambdaHandwritten = "lambda-handwritten" // a hand-written handler: each record's transaction in turn, no dedup
)

// consumerNames are the -consumer values, as its help and errors list them.
const consumerNames = "handwritten, worker, grouped, carried, lambda or lambda-handwritten"

// consumeOpts are the flags of `bench consume`.
type consumeOpts struct {
	consumer, regime           string
	queue, dedup, ledger       string
	concurrency                int
	prefill, groups            int
	size, queues               int
	effectDelay                time.Duration
	standard                   bool           // aws regime: standard queues instead of FIFO
	batch                      int            // lambda consumers: the mapping's batch size
	window                     time.Duration  // lambda consumers: the mapping's batching window
	queueURLs                  []string       // aws regime: every queue of the fakes
	srv                        *memsqs.Server // aws regime: the fake queues, unheld
	pace                       float64        // aws regime: a paced producer's msg/s (0: none)
	paceWarmup, paceWindow     time.Duration
	scale, jitter              float64
	seed                       uint64
	cpuProfile, metricsAddr    string
	blockProfile, mutexProfile string
}

// Consume is `bench consume`: one consumer in its own process, so that its
// CPU and memory are its own. It serves /metrics (the worker's names) and
// logs the worker's "serving" line, so that the harness reads it as it
// reads `worker run`. In the aws regime it makes its own fakes and fills
// the queue before it serves.
func Consume(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o consumeOpts
	fs.StringVar(&o.consumer, "consumer", ConsumerHandwritten, consumerNames)
	fs.StringVar(&o.regime, "regime", RegimeEmulator, "emulator (the SDK against AWS_ENDPOINT_URL*) or aws (in-memory fakes held for AWS-like latency)")
	fs.StringVar(&o.queue, "queue", "", "queue URL (emulator regime)")
	fs.StringVar(&o.dedup, "table", "", "dedup table (emulator regime, worker)")
	fs.StringVar(&o.ledger, "ledger-table", "", "ledger table (emulator regime)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "messages in flight: the worker's --concurrency; the hand-written consumer's receive loops")
	fs.IntVar(&o.prefill, "prefill", 0, "aws regime: messages sent to the fake queue before serving")
	fs.IntVar(&o.groups, "groups", 1024, "aws regime: message groups of the pre-fill")
	fs.IntVar(&o.size, "size", 0, "aws regime: bytes of each pre-filled body (padded; 0: the bare deposit, about 50 B)")
	fs.IntVar(&o.queues, "queues", 1, "aws regime: queues (FIFO unless -standard) the pre-fill is spread over, all consumed by the one consumer")
	fs.DurationVar(&o.effectDelay, "effect-delay", 0, "how long each effect takes before it builds its writes (a call the effect waits on)")
	fs.BoolVar(&o.standard, "standard", false, "aws regime: standard queues (bench, bench-1, ...) instead of FIFO; the pre-fill has no group or dedup ids")
	fs.IntVar(&o.batch, "batch", 10, "lambda consumers: the event source mapping's batch size, 1 to 10")
	fs.DurationVar(&o.window, "window", 0, "lambda consumers: the event source mapping's batching window (0: none)")
	fs.Float64Var(&o.pace, "pace", 0, "aws regime: a producer in this process sends this many messages a second while the consumer runs, "+
		"and each message's send-to-effect time is measured (exactly_bench_send_effect_*; 0: no producer)")
	fs.DurationVar(&o.paceWarmup, "pace-warmup", 0, "-pace: messages sent in this first stretch are not measured")
	fs.DurationVar(&o.paceWindow, "pace-window", 0, "-pace: the producer stops after -pace-warmup and this long, and the messages it sent in it are measured (0: it sends until the process ends)")
	fs.Float64Var(&o.scale, "latency-scale", 1, "aws regime: latency scale (0: the fakes at their own speed)")
	fs.Float64Var(&o.jitter, "jitter", DefaultJitter, "aws regime: latency jitter, a fraction")
	fs.Uint64Var(&o.seed, "seed", 1, "aws regime: seed of the jitter")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the process, from serving to exit")
	fs.StringVar(&o.blockProfile, "blockprofile", "", "write a goroutine blocking profile at exit (every blocking event sampled)")
	fs.StringVar(&o.mutexProfile, "mutexprofile", "", "write a mutex contention profile at exit (every event sampled)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:0", "address of /metrics")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lambda := o.consumer == ConsumerLambda || o.consumer == ConsumerLambdaHandwritten
	switch o.consumer {
	case ConsumerHandwritten, ConsumerWorker, ConsumerGrouped, ConsumerCarried, ConsumerLambda, ConsumerLambdaHandwritten:
	default:
		return fmt.Errorf("-consumer %q: want %s", o.consumer, consumerNames)
	}
	switch {
	case lambda && o.regime != RegimeAWS:
		return fmt.Errorf("-consumer %s: runs only in -regime aws (its event source mapping is modelled on the in-memory fakes), not %q", o.consumer, o.regime)
	case o.batch < 1 || o.batch > 10:
		return fmt.Errorf("-batch %d: want 1 to 10 (an SQS event source mapping's batch size without a window, as one receive holds)", o.batch)
	case o.window < 0 || o.window > maxBatchingWindow:
		return fmt.Errorf("-window %s: want 0 to %s (Lambda's MaximumBatchingWindowInSeconds)", o.window, maxBatchingWindow)
	}
	if o.pace < 0 || o.paceWarmup < 0 || o.paceWindow < 0 || o.pace > 0 && o.regime != RegimeAWS {
		return fmt.Errorf("-pace %g, -pace-warmup %s, -pace-window %s: want 0 or more, a producer only in -regime aws (its fakes)", o.pace, o.paceWarmup, o.paceWindow)
	}
	if o.queues < 1 || o.size < 0 || o.size > maxBatchBytes || o.effectDelay < 0 {
		return fmt.Errorf("bench consume: -queues %d, -size %d, -effect-delay %s: want at least 1 queue, a size from 0 to %d bytes and a delay of 0 or more",
			o.queues, o.size, o.effectDelay, maxBatchBytes)
	}
	reg := prometheus.NewRegistry()
	// As `worker run`: the Go and process collectors.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var (
		sq  fakeSQS
		db  fakeDynamoDB
		st  *states
		err error
	)
	switch o.regime {
	case RegimeAWS:
		st = newStates(reg)
		sq, db, err = o.fakes(ctx, reg, st)
	case RegimeEmulator:
		var cl *clients
		if cl, err = newClients(ctx, 0); err == nil {
			reg.MustRegister(requestsCollector{cl.reqs})
			sq, db = cl.sqs, cl.db
		}
		if o.queue == "" || o.ledger == "" {
			err = errors.New("emulator regime: -queue and -ledger-table are required")
		}
		o.queueURLs = []string{o.queue}
	default:
		err = fmt.Errorf("-regime %q: want emulator or aws", o.regime)
	}
	if err != nil {
		return err
	}
	waits := newGroupWaits(reg)
	var sends *sendEffects // nil: no paced producer
	if o.pace > 0 {
		sends = newSendEffects()
		reg.MustRegister(sends)
	}
	var run func(context.Context) error
	if lambda {
		handle, err := o.lambdaHandler(ctx, sq, db, reg, waits, st, sends, stderr)
		if err != nil {
			return err
		}
		m, err := newESM(ctx, sq, o.queueURLs, o.batch, o.window, handle, reg)
		if err != nil {
			return err
		}
		run = func(ctx context.Context) error { return m.run(ctx, o.concurrency) }
	} else if o.consumer == ConsumerHandwritten {
		h := newHandwritten(sq, db, o.queueURLs, o.ledger, reg)
		h.ledger = &timedLedger{Ledger: h.ledger.(*builtin.Ledger), waits: waits, states: st, sends: sends, delay: o.effectDelay}
		run = func(ctx context.Context) error { return h.run(ctx, o.concurrency) }
	} else {
		cfg := exactly.Config{
			SQS: sq, DynamoDB: db, Queues: o.queueURLs, Table: o.dedup,
			Effect: &timedLedger{Ledger: &builtin.Ledger{Table: o.ledger}, waits: waits, states: st, sends: sends, delay: o.effectDelay}, Commit: exactly.CommitMode(DefaultCommit),
			Concurrency: o.concurrency, Logger: slog.New(slog.NewJSONHandler(stderr, nil)), Registerer: reg,
		}
		switch o.consumer {
		case ConsumerGrouped:
			cfg.GroupCommit = GroupCommitWindow
		case ConsumerCarried:
			cfg.Commit = exactly.CommitCarried
		}
		w, err := exactly.New(ctx, cfg)
		if err != nil {
			return err
		}
		run = w.Run
	}
	srv, err := telemetry.Listen(o.metricsAddr, reg)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go srv.Serve(sctx, slog.New(slog.DiscardHandler))
	srv.SetReady(true)
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	for _, p := range []struct{ name, file string }{{"block", o.blockProfile}, {"mutex", o.mutexProfile}} {
		if p.file == "" {
			continue
		}
		if p.name == "block" {
			runtime.SetBlockProfileRate(1)
		} else {
			runtime.SetMutexProfileFraction(1)
		}
		defer func() {
			if f, err := os.Create(p.file); err == nil {
				_ = pprof.Lookup(p.name).WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	if sends != nil {
		// The producer is this function's: it stops at its window's end or
		// when ctx ends, and Consume returns after it has.
		pctx, pstop := context.WithCancel(ctx)
		p := o.pacedProducer(sends, func(err error) {
			line, _ := json.Marshal(map[string]string{"level": "WARN", "msg": "paced send failed", "error": err.Error()})
			fmt.Fprintln(stderr, string(line))
		})
		done := make(chan struct{})
		go func() { defer close(done); p.run(pctx) }()
		defer func() { pstop(); <-done }()
	}
	line, _ := json.Marshal(map[string]string{"msg": metricsLine, "addr": srv.Addr()})
	fmt.Fprintln(stderr, string(line))
	return run(ctx)
}

// lambdaHandler is the handler of a lambda consumer: the library's
// LambdaHandler with the worker's effect and commit (its lines at warn and
// above: "batch done" at info would be a line per batch on stderr), or the
// hand-written one.
func (o *consumeOpts) lambdaHandler(ctx context.Context, sq fakeSQS, db fakeDynamoDB, reg *prometheus.Registry, waits *groupWaits, st *states, sends *sendEffects, stderr io.Writer) (lambdaHandle, error) {
	eff := &timedLedger{Ledger: &builtin.Ledger{Table: o.ledger}, waits: waits, states: st, sends: sends, delay: o.effectDelay}
	if o.consumer == ConsumerLambdaHandwritten {
		h := newHandwrittenLambda(db, o.ledger, reg)
		h.ledger = eff
		return h.Handle, nil
	}
	h, err := exactly.NewLambdaHandler(ctx, exactly.Config{
		SQS: sq, DynamoDB: db, Queues: o.queueURLs, Table: o.dedup, Effect: eff, Commit: exactly.CommitMode(DefaultCommit),
		Logger: slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Registerer: reg,
		// The fakes' queues have no dead-letter queue to move a permanent
		// failure to (the ledger's deposits have none).
		LeaveToRedrivePolicy: true,
	})
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// fakes makes the aws regime's fake queue and tables, fills the queue at
// full speed and returns the fakes behind the latency layer.
func (o *consumeOpts) fakes(ctx context.Context, reg prometheus.Registerer, st *states) (fakeSQS, fakeDynamoDB, error) {
	srv := memsqs.New()
	mdb := memdynamo.New()
	for i := range max(o.queues, 1) {
		name := "bench"
		if i > 0 {
			name += "-" + strconv.Itoa(i)
		}
		attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(int(SweepVisibility.Seconds()))}
		if !o.standard {
			name += ".fifo"
			attrs["FifoQueue"] = "true"
		}
		out, err := srv.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return nil, nil, err
		}
		o.queueURLs = append(o.queueURLs, aws.ToString(out.QueueUrl))
	}
	o.queue, o.dedup, o.ledger = o.queueURLs[0], "bench-dedup", "bench-ledger"
	for _, t := range []string{o.dedup, o.ledger} {
		if _, err := mdb.CreateTable(ctx, keyedTableInput(t)); err != nil {
			return nil, nil, err
		}
	}
	if _, err := mdb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &o.dedup,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	}); err != nil {
		return nil, nil, err
	}
	// Queue i gets the groups g with g % queues == i, so every queue has
	// its share of the backlog and each group stays in one queue.
	w := Workload(o.prefill, o.groups)
	w.Size = o.size
	w.Standard = o.standard
	for i, url := range o.queueURLs {
		if err := fill(ctx, srv, url, w.Shard(i, len(o.queueURLs))); err != nil {
			return nil, nil, err
		}
	}
	o.srv = srv
	l := NewLatency(o.scale, o.jitter, o.seed)
	c := newCounter(reg)
	return &heldSQS{s: srv, l: l, c: c, st: st}, &heldDynamoDB{d: mdb, l: l, c: c}, nil
}

// fill sends batches to url on the fake, unheld.
func fill(ctx context.Context, srv *memsqs.Server, url string, batches [][]sqstypes.SendMessageBatchRequestEntry) error {
	for _, batch := range batches {
		r, err := srv.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: batch})
		if err == nil && len(r.Failed) > 0 {
			err = errors.New(aws.ToString(r.Failed[0].Message))
		}
		if err != nil {
			return fmt.Errorf("pre-fill: %w", err)
		}
	}
	return nil
}

// groupWaits measures how long each FIFO group waits for its next
// message: from the end of one effect to the start of the next in the
// same group.
type groupWaits struct {
	mu    sync.Mutex
	last  map[string]time.Time
	sum   prometheus.Counter
	count prometheus.Counter
}

func newGroupWaits(reg prometheus.Registerer) *groupWaits {
	g := &groupWaits{
		last: map[string]time.Time{},
		sum: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: "bench_group_wait_seconds_total",
			Help: "time groups waited between the end of one effect and the start of the next"}),
		count: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: "bench_group_waits_total",
			Help: "waits counted in exactly_bench_group_wait_seconds_total"}),
	}
	reg.MustRegister(g.sum, g.count)
	return g
}

func (g *groupWaits) start(group string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[group]; ok {
		g.sum.Add(time.Since(t).Seconds())
		g.count.Inc()
	}
}

func (g *groupWaits) done(group string) {
	g.mu.Lock()
	g.last[group] = time.Now()
	g.mu.Unlock()
}

// timedLedger is the ledger effect timed per group and, in the aws
// regime, per message (states: nil in the emulator regime); it stays
// WritesOnly.
type timedLedger struct {
	*builtin.Ledger
	waits  *groupWaits
	states *states
	sends  *sendEffects  // a paced run's send-to-effect times; nil: none
	delay  time.Duration // how long the effect waits before it builds its writes (a slow call of its own)
}

func (t *timedLedger) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	t.waits.start(in.Message.Group)
	t.states.start(in.Message.ID)
	defer t.states.end(in.Message.ID)
	defer t.waits.done(in.Message.Group)
	if err := hold(ctx, t.delay); err != nil {
		return effect.Output{}, err
	}
	// The writes start: where the ledger stamps applied_at.
	t.sends.effectAt(in.Message.ID, time.Now())
	return t.Ledger.Apply(ctx, in)
}

func keyedTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	}
}

// requestsCollector exports a telemetry.Requests registered nowhere.
type requestsCollector struct{ r *telemetry.Requests }

var (
	requestsDesc = prometheus.NewDesc("exactly_aws_requests_total", "AWS requests by service and operation", []string{"service", "operation"}, nil)
	unitsDesc    = prometheus.NewDesc("exactly_dynamodb_write_units_total", "DynamoDB write units as AWS bills them", nil, nil)
)

func (c requestsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- requestsDesc; ch <- unitsDesc }

func (c requestsCollector) Collect(ch chan<- prometheus.Metric) {
	for k, v := range c.r.Snapshot() {
		svc, op := splitOp(k)
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(v), svc, op)
	}
	ch <- prometheus.MustNewConstMetric(unitsDesc, prometheus.CounterValue, float64(c.r.WriteUnitsTotal()))
}

func splitOp(k string) (string, string) {
	for i := range len(k) {
		if k[i] == '.' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

// handwritten is the at-least-once consumer a careful engineer writes by
// hand: loops that each receive up to 10 messages (20 s long poll), apply
// each message's ledger writes (account update and entry) in one
// TransactWriteItems, one after the other, and delete the applied ones in
// one DeleteMessageBatch. No dedup record, no claim, no lease: a redelivery
// applies twice. A message whose writes fail is left to come back after
// its visibility timeout. With N loops at most N transactions are in
// flight, as with the worker's --concurrency N.
type handwritten struct {
	sqs    fakeSQS
	db     fakeDynamoDB
	urls   []string // loop i starts at queue i and moves on one queue a batch
	ledger effect.Effect

	applied, received, failed prometheus.Counter
}

func newHandwritten(sq fakeSQS, db fakeDynamoDB, urls []string, ledgerTable string, reg prometheus.Registerer) *handwritten {
	c := func(name string) prometheus.Counter {
		v := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: name, Help: name})
		reg.MustRegister(v)
		return v
	}
	return &handwritten{
		sqs: sq, db: db, urls: urls, ledger: &builtin.Ledger{Table: ledgerTable},
		applied: c("effects_applied_total"), received: c("messages_received_total"), failed: c("permanent_failures_total"),
	}
}

// run runs conc receive loops until ctx ends; work received is finished.
func (h *handwritten) run(ctx context.Context, conc int) error {
	done := make(chan struct{}, conc)
	for i := range conc {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := i; ctx.Err() == nil; k++ {
				h.batch(ctx, h.urls[k%len(h.urls)])
			}
		}()
	}
	for range conc {
		<-done
	}
	return nil
}

func (h *handwritten) batch(ctx context.Context, url string) {
	out, err := h.sqs.ReceiveMessage(ctx, receiveInput(url, 10, 20))
	if err != nil {
		if ctx.Err() == nil {
			h.failed.Inc()
			_ = sleep(ctx, 100*time.Millisecond)
		}
		return
	}
	h.received.Add(float64(len(out.Messages)))
	wctx := context.WithoutCancel(ctx)
	ok := out.Messages[:0]
	for _, m := range out.Messages {
		if err := applyOnce(wctx, h.ledger, h.db, sqsmsg.ToMessage(url, m)); err != nil {
			h.failed.Inc()
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		return
	}
	res, err := h.sqs.DeleteMessageBatch(wctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: deleteEntries(ok)})
	if err != nil {
		h.failed.Add(float64(len(ok)))
		return
	}
	h.failed.Add(float64(len(res.Failed)))
	h.applied.Add(float64(len(res.Successful)))
}
