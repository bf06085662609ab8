package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/exactlyonce/exactly"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/telemetry"
	"github.com/exactlyonce/exactly/outbox"
)

// Defaults of settings shared by run and lambda.
const (
	DefaultDedupTable  = "exactly-dedup"
	DefaultLedgerTable = "exactly-ledger"
	DefaultNamespace   = "exactly"
	DefaultDedupTTL    = 24 * time.Hour
	DefaultMetricsAddr = ":9090"
	// DefaultOutboxTable is the outbox table of `worker relay`, `worker
	// outbox` and of effects that send messages (outbox package).
	DefaultOutboxTable = "exactly-outbox"
	// DefaultRetryInPlace: two retries in place (about 1 s and 2 s) ride
	// out a brief blip of a downstream without a trip through SQS.
	DefaultRetryInPlace = 2
)

// settings are the worker's settings, from flags and WORKER_* variables.
type settings struct {
	queues           []string
	table            string
	effect           string
	effects          Effects // what --effect may name
	ledgerTable      string
	outboxTable      string
	ledgerConfirm    string
	dedupKey         string
	payloadHash      string
	commit           string
	metricsFormat    string
	emfNamespace     string
	emfInterval      time.Duration
	groupCommit      time.Duration
	namespace        string
	dedupTTL         time.Duration
	lease            time.Duration
	visibility       time.Duration
	concurrency      int
	receivers        int
	maxInFlight      int
	shutdownTimeout  time.Duration
	moveToDLQ        bool
	metricsAddr      string
	httpURL          string
	logFormat        string
	logLevel         string
	progress         time.Duration
	waitTime         time.Duration
	ackDelay         time.Duration
	retryInPlace     int
	fifoFailRest     string // lambda only
	snsSubscriptions []string
	dedupScope       string // lambda only
}

func newRunSet(s *settings, lookup func(string) (string, bool)) *config.Set {
	fs := config.NewSet("worker run", nil, lookup)
	s.define(fs, false)
	return fs
}

// define declares the settings on fs; forLambda drops what Lambda has no use
// for and adds its own (see lambda.go).
func (s *settings) define(fs *config.Set, forLambda bool) {
	if forLambda {
		fs.List(&s.queues, "queue", "WORKER_QUEUES", "URL of a queue the function consumes, optional: its attributes are read once at cold start and its DeduplicationScope scopes the dedup keys")
	} else {
		fs.List(&s.queues, "queue", "WORKER_QUEUES", "SQS queue URL to consume")
	}
	fs.List(&s.snsSubscriptions, "sns-subscription", "WORKER_SNS_SUBSCRIPTIONS", "QUEUE_URL=TOPIC_ARN, or QUEUE_URL=TOPIC_ARN+raw with raw message delivery on: the queue is subscribed to that SNS topic; its messages are unwrapped (SNS's envelope, or the raw message and its attributes) before the dedup key, the payload hash and the effect see them, and a body that is not the envelope is a permanent failure")
	fs.String(&s.table, "table", "WORKER_DEDUP_TABLE", DefaultDedupTable, "DynamoDB dedup table")
	fs.String(&s.effect, "effect", "WORKER_EFFECT", "", "effect to apply: "+strings.Join(s.effects.names(), "|")+" (required)")
	fs.String(&s.ledgerTable, "ledger-table", "WORKER_LEDGER_TABLE", DefaultLedgerTable, "DynamoDB table of the ledger effect")
	fs.String(&s.ledgerConfirm, "ledger-confirm-queue", "WORKER_LEDGER_CONFIRM_QUEUE", "", "ledger effect: URL of a queue, or ARN of an SNS topic, to send each entry's confirmation to, through the outbox (needs --outbox-table)")
	fs.String(&s.outboxTable, "outbox-table", "WORKER_OUTBOX_TABLE", "", "DynamoDB outbox table (worker setup --outbox-table) for the messages effects send (Output.Send), committed with their dedup records and published by worker relay; empty: an effect that sends fails permanently")
	fs.String(&s.dedupKey, "dedup-key", "WORKER_DEDUP_KEY", "auto", "dedup key source: auto (idempotency-key attribute, else MessageDeduplicationId, else the SNS MessageId on a subscribed queue, else MessageId), attr:NAME, json:/pointer or body")
	fs.String(&s.payloadHash, "payload-hash", "WORKER_PAYLOAD_HASH", "body", "what tells a duplicate from a conflict (same key, another payload): body (byte for byte), json:/a,/b (those JSON values, canonicalised: a producer that re-serialises or adds a timestamp on retry is still a duplicate) or none")
	fs.String(&s.commit, "commit", "WORKER_COMMIT", "", "how the effect and its dedup record commit: claim (claim the key, run the effect, then complete: any effect), transactional (claim, then the effect's DynamoDB writes and the record in one transaction), optimistic (no claim: the writes and the record in one transaction, one DynamoDB request per message) or carried (optimistic with the record's attributes on the effect's own per-message item, no write of its own: ledger); empty: optimistic for an effect whose whole effect is its DynamoDB writes (ledger, noop), claim otherwise")
	fs.Duration(&s.groupCommit, "group-commit", "WORKER_GROUP_COMMIT", 0, "optimistic mode: gather the commits ready within this window (e.g. 5ms) into one DynamoDB transaction, which goes as soon as every message under way has joined it: fewer requests, more messages per second where requests are the bottleneck; a duplicate cancels the shared transaction and the others are retried alone (0: each alone; DynamoDB bills write units, not requests)")
	fs.String(&s.namespace, "namespace", "WORKER_NAMESPACE", DefaultNamespace, "first part of every dedup key; workers that must dedup together share it")
	fs.Duration(&s.dedupTTL, "dedup-ttl", "WORKER_DEDUP_TTL", DefaultDedupTTL, "how long a completed message suppresses its duplicates")
	fs.String(&s.httpURL, "http-url", "WORKER_HTTP_URL", "", "URL the http effect POSTs to")
	fs.String(&s.logFormat, "log-format", "WORKER_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal)")
	fs.String(&s.logLevel, "log-level", "WORKER_LOG_LEVEL", "info", "debug, info, warn or error")
	if forLambda {
		fs.Bool(&s.moveToDLQ, "move-to-dlq", "WORKER_MOVE_TO_DLQ", false, "send permanent failures straight to the queue's dead-letter queue instead of waiting for the redrive policy (a queue not in --queue is read at its first event)")
	} else {
		// By default: a poison message that waits for the redrive policy holds
		// its FIFO group back, and the rest of the group, received along with
		// it each time, would reach maxReceiveCount and be dead-lettered too.
		fs.Bool(&s.moveToDLQ, "move-to-dlq", "WORKER_MOVE_TO_DLQ", true, "send permanent failures straight to the queue's dead-letter queue (from its redrive policy) instead of cycling them until maxReceiveCount; false leaves them to the redrive policy")
	}
	if forLambda {
		fs.Int(&s.retryInPlace, "retry-in-place", "WORKER_RETRY_IN_PLACE", DefaultRetryInPlace, "retryable failures retried in place, with backoff, within the invocation while its time left allows the wait (billed), before the message is reported as a batch item failure: the rest of its FIFO group waits in the batch instead of going back with it, so that their receive counts do not climb towards maxReceiveCount (0: reported at once)")
	} else {
		fs.Int(&s.retryInPlace, "retry-in-place", "WORKER_RETRY_IN_PLACE", DefaultRetryInPlace, "retryable failures retried in place, with backoff, before the message goes back to SQS: the worker keeps it and the rest of its FIFO group hidden meanwhile, so that their receive counts do not climb towards maxReceiveCount (0: back to SQS at once)")
	}
	if forLambda {
		fs.Int(&s.concurrency, "concurrency", "WORKER_CONCURRENCY", DefaultLambdaConcurrency, "message groups of one batch handled at once")
		fs.String(&s.fifoFailRest, "fifo-fail-rest", "WORKER_FIFO_FAIL_REST", "group", "FIFO: what a failed message takes with it into batchItemFailures: group (the later messages of its group; other groups go on) or batch (every later message of the batch; the batch then runs one message at a time)")
		fs.String(&s.dedupScope, "dedup-scope", "WORKER_DEDUP_SCOPE", "", "queue or group: scope of dedup keys, as the queue's DeduplicationScope (queue or messageGroup); default: read from --queue, else queue")
		fs.String(&s.metricsFormat, "metrics-format", "WORKER_METRICS_FORMAT", "emf", "emf: each batch's metrics as CloudWatch Embedded Metric Format lines on stdout, which the function's log turns into metrics (namespace --emf-namespace, dimension Queue); none: off")
		fs.String(&s.emfNamespace, "emf-namespace", "WORKER_EMF_NAMESPACE", exactly.DefaultEMFNamespace, "CloudWatch namespace of the EMF metrics")
		return
	}
	fs.String(&s.metricsFormat, "metrics-format", "WORKER_METRICS_FORMAT", "prometheus", "prometheus (/metrics on --metrics-addr), emf (CloudWatch Embedded Metric Format lines on stdout every --emf-interval, which the awslogs driver turns into metrics; no /metrics) or both")
	fs.String(&s.emfNamespace, "emf-namespace", "WORKER_EMF_NAMESPACE", exactly.DefaultEMFNamespace, "CloudWatch namespace of the EMF metrics")
	fs.Duration(&s.emfInterval, "emf-interval", "WORKER_EMF_INTERVAL", exactly.DefaultEMFInterval, "how often the EMF lines are written (and once when drained)")
	fs.Duration(&s.lease, "lease", "WORKER_LEASE", 0, "dedup lease per claim, extended by heartbeats (0: the queue's visibility timeout less a tenth, at least 1s)")
	fs.Duration(&s.visibility, "visibility", "WORKER_VISIBILITY", 0, "override the queue's visibility timeout used for heartbeats (0: read from the queue)")
	fs.Int(&s.concurrency, "concurrency", "WORKER_CONCURRENCY", pool.DefaultConcurrency, "handlers running at once (message groups in parallel)")
	fs.Int(&s.receivers, "receivers", "WORKER_RECEIVERS", 0, "concurrent long polls per queue (0: one per 8 of --concurrency, at least 2; with --group-commit one per 4)")
	fs.Duration(&s.waitTime, "wait-time", "WORKER_WAIT_TIME", pool.DefaultWaitTime, "long-poll wait, 1s to 20s, cut to half a queue's visibility timeout; a shutdown waits for a busy queue's polls under way to return (an idle queue's are abandoned at once), so it bounds that wait too")
	fs.Duration(&s.ackDelay, "ack-delay", "WORKER_ACK_DELAY", pool.DefaultAckDelay, "how long deletes and visibility changes wait to fill a batch of 10 (fewer SQS requests; a FIFO group's next receive waits for its deletes); with no other message of the queue held they go at once")
	fs.Int(&s.maxInFlight, "max-in-flight", "WORKER_MAX_IN_FLIGHT", 0, "messages received and not yet finished (0: 10 × (concurrency + receivers); a standard queue's lanes hold at most 2×concurrency + 10 per receiver)")
	fs.Duration(&s.shutdownTimeout, "shutdown-timeout", "WORKER_SHUTDOWN_TIMEOUT", pool.DefaultShutdownTimeout, "on SIGTERM, how long running handlers may finish (keep it below ECS stopTimeout)")
	fs.String(&s.metricsAddr, "metrics-addr", "WORKER_METRICS_ADDR", DefaultMetricsAddr, "address of /healthz, /readyz and /metrics (empty: off)")
	fs.Duration(&s.progress, "progress", "WORKER_PROGRESS", 10*time.Second, "interval of the progress log line (0: off)")
}

// validate checks values; every error names the setting and the fix. The
// library checks the settings it shares (exactly.Config.Validate); the
// command line adds its own.
func (s *settings) validate(fs *config.Set, forLambda bool) error {
	if s.effect == "" {
		return config.Errorf("%s is required: one of %s", fs.Name("effect"), strings.Join(s.effects.names(), ", "))
	}
	if s.effects[s.effect] == nil {
		return config.Errorf("%s %q is unknown: want one of %s", fs.Name("effect"), s.effect, strings.Join(s.effects.names(), ", "))
	}
	if s.namespace == "" {
		return config.Errorf("%s %q: want a non-empty name without '#' or '%%'", fs.Name("namespace"), s.namespace)
	}
	if s.concurrency < 1 {
		return config.Errorf("%s must be at least 1", fs.Name("concurrency"))
	}
	if s.ledgerConfirm != "" && !outbox.IsTopicARN(s.ledgerConfirm) && !strings.HasPrefix(s.ledgerConfirm, "https://") && !strings.HasPrefix(s.ledgerConfirm, "http://") {
		return config.Errorf("%s %q: want a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>) or an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)", fs.Name("ledger-confirm-queue"), s.ledgerConfirm)
	}
	if s.ledgerConfirm != "" && s.outboxTable == "" {
		return config.Errorf("%s needs %s: the confirmations go through the outbox", fs.Name("ledger-confirm-queue"), fs.Name("outbox-table"))
	}
	formats := []string{"prometheus", "emf", "both"}
	if forLambda {
		formats = []string{"emf", "none"}
	}
	if !slices.Contains(formats, s.metricsFormat) {
		return config.Errorf("%s %q: want %s", fs.Name("metrics-format"), s.metricsFormat, strings.Join(formats, ", "))
	}
	if s.retryInPlace < 0 {
		return config.Errorf("%s must be between 0 and 20", fs.Name("retry-in-place"))
	}
	cfg := s.config(nil, nil, nil, nil)
	if forLambda {
		return cliError(fs, cfg.ValidateLambda())
	}
	switch {
	case s.receivers < 0:
		return config.Errorf("%s must be at least 1 (0: one per 8 of %s, at least 2)", fs.Name("receivers"), fs.Name("concurrency"))
	case s.shutdownTimeout <= 0:
		return config.Errorf("%s must be positive", fs.Name("shutdown-timeout"))
	case s.waitTime <= 0:
		return config.Errorf("%s must be whole seconds from 1s to 20s (SQS's long-poll range)", fs.Name("wait-time"))
	case s.ackDelay <= 0:
		return config.Errorf("%s must be between 1ms and 5s", fs.Name("ack-delay"))
	}
	return cliError(fs, cfg.Validate())
}

// config is the library's configuration for these settings.
func (s *settings) config(cl *clients, eff effect.Effect, log *slog.Logger, reg prometheus.Registerer) exactly.Config {
	retry := s.retryInPlace
	if retry == 0 {
		retry = -1 // none: the command line's 0 is the library's negative
	}
	c := exactly.Config{
		Queues: s.queues, Table: s.table, Effect: eff, KeySource: s.dedupKey, PayloadHash: s.payloadHash,
		Commit: exactly.CommitMode(s.commit), GroupCommit: s.groupCommit, Namespace: s.namespace, TTL: s.dedupTTL, Lease: s.lease, Visibility: s.visibility,
		Concurrency: s.concurrency, Receivers: s.receivers, MaxInFlight: s.maxInFlight,
		WaitTime: s.waitTime, AckDelay: s.ackDelay, RetryInPlace: retry, ShutdownTimeout: s.shutdownTimeout,
		LeaveToRedrivePolicy: !s.moveToDLQ,
		Lambda:               exactly.LambdaConfig{FailRest: s.fifoFailRest, DedupScope: s.dedupScope},
		EMF:                  exactly.EMF{Namespace: s.emfNamespace, Interval: s.emfInterval},
		Logger:               log, Registerer: reg,
		Subscriptions: subscriptions(s.snsSubscriptions),
	}
	if cl != nil {
		c.SQS, c.DynamoDB = cl.sqs, cl.dynamo
		if s.outboxTable != "" {
			c.Outbox = outbox.New(cl.dynamo, s.outboxTable)
		}
	}
	return c
}

// subscriptions parses --sns-subscription's QUEUE_URL=TOPIC_ARN[+raw]; a
// malformed one keeps what it has, and the library's check names it.
func subscriptions(specs []string) []exactly.Subscription {
	var out []exactly.Subscription
	for _, spec := range specs {
		queue, topic, _ := strings.Cut(spec, "=")
		topic, raw := strings.CutSuffix(topic, "+raw")
		out = append(out, exactly.Subscription{Queue: queue, Topic: topic, Raw: raw})
	}
	return out
}

// flagOf names the flag of each library setting, for its errors.
var flagOf = map[string]string{
	"Queues": "queue", "Table": "table", "Effect": "effect", "KeySource": "dedup-key", "PayloadHash": "payload-hash",
	"Commit": "commit", "GroupCommit": "group-commit", "Namespace": "namespace", "TTL": "dedup-ttl", "Lease": "lease", "Visibility": "visibility",
	"Concurrency": "concurrency", "Receivers": "receivers", "MaxInFlight": "max-in-flight", "WaitTime": "wait-time",
	"AckDelay": "ack-delay", "RetryInPlace": "retry-in-place", "ShutdownTimeout": "shutdown-timeout",
	"LeaveToRedrivePolicy": "move-to-dlq", "EMF.Interval": "emf-interval", "Lambda.FailRest": "fifo-fail-rest", "Lambda.DedupScope": "dedup-scope",
	"Subscriptions": "sns-subscription",
}

// cliError turns the library's *exactly.ConfigError into the command
// line's configuration error, naming flags instead of Config fields.
func cliError(fs *config.Set, err error) error {
	var ce *exactly.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	name := func(setting string) string {
		if f, ok := flagOf[setting]; ok {
			return fs.Name(f)
		}
		return "Config." + setting
	}
	msg := ce.Msg
	for setting := range flagOf {
		msg = strings.ReplaceAll(msg, "Config."+setting, name(setting))
	}
	if ce.Setting == "" {
		return config.Errorf("%s", strings.TrimLeft(msg, ": "))
	}
	return config.Errorf("%s%s", name(ce.Setting), msg)
}

func runCommand(ctx context.Context, force <-chan struct{}, effects Effects, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	s := settings{effects: effects}
	fs := newRunSet(&s, lookup)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := s.validate(fs, false); err != nil {
		return err
	}
	log, err := telemetry.NewLogger(stderr, s.logFormat, s.logLevel)
	if err != nil {
		return config.Errorf("%s", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	telemetry.RegisterBuildInfo(reg, Version)
	cl, err := newClients(ctx, lookup, telemetry.NewRequests(reg), keepIdle(s.awsCalls()))
	if err != nil {
		return err
	}
	defer cl.close()
	eff, err := buildEffect(s, cl, log, lookup)
	if err != nil {
		return err
	}
	// What the effect allows (its commit modes) is known now, before the
	// listener starts.
	if err := cliError(fs, s.config(cl, eff, log, reg).Validate()); err != nil {
		return err
	}
	// /healthz answers from the start; /readyz only once the start-up checks
	// have passed, and no more from the moment a drain starts.
	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopBG(); bg.Wait() }()
	var srv *telemetry.Server
	if s.metricsAddr != "" {
		var gatherer prometheus.Gatherer = reg
		if s.metricsFormat == "emf" {
			gatherer = nil // no /metrics: nothing scrapes it
		}
		if srv, err = telemetry.Listen(s.metricsAddr, gatherer); err != nil {
			return config.Errorf("%s %q: %v", fs.Name("metrics-addr"), s.metricsAddr, err)
		}
		bg.Go(func() { srv.Serve(bgCtx, log) })
		log.Info("serving /healthz, /readyz and /metrics", "addr", srv.Addr())
	}
	tp, err := tracing(ctx, lookup)
	if err != nil {
		return err
	}
	defer shutdownTracing(tp, log)
	cfg := s.config(cl, eff, log, reg)
	if tp != nil {
		cfg.TracerProvider = tp
	}
	if s.metricsFormat != "prometheus" {
		cfg.EMF.Writer = stdout
	}
	w, err := exactly.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM during the start-up checks: nothing has started, so
			// this is a graceful stop, not a failure.
			log.Info("stopped during start-up", "err", err)
			return nil
		}
		return cliError(fs, err)
	}
	if srv != nil {
		srv.SetReady(true)
		bg.Go(func() {
			select {
			case <-ctx.Done():
				srv.SetReady(false) // draining: take no new traffic
			case <-bgCtx.Done():
			}
		})
	}
	if s.progress > 0 {
		bg.Go(func() { logProgress(bgCtx, log, w.Stats, s.progress) })
	}
	bg.Go(func() {
		select {
		case <-force:
			log.Warn("second signal: cancelling running handlers now")
			_ = w.StopAndCancel(context.WithoutCancel(ctx))
		case <-bgCtx.Done():
		}
	})
	log.Info("worker started", "version", Version, "queues", strings.Join(s.queueNames(), ","), "effect", s.effect,
		"table", s.table, "concurrency", s.concurrency, "dedup_key", s.dedupKey, "payload_hash", s.payloadHash, "dedup_ttl_ms", s.dedupTTL.Milliseconds())
	err = w.Run(ctx)
	t := w.Stats()
	log.Info("worker stopped", "received", t.Received, "applied", t.Applied, "duplicates", t.Duplicates,
		"retries", t.Retries, "permanent_failures", t.PermanentFailures, "conflicts", t.Conflicts)
	return err
}

func buildEffect(s settings, cl *clients, log *slog.Logger, lookup func(string) (string, bool)) (effect.Effect, error) {
	eff, err := s.effects[s.effect](effectEnv(s, cl, log, lookup))
	if err != nil {
		return nil, config.Errorf("--effect %s: %v", s.effect, err)
	}
	return eff, nil
}

// effectEnv is what an effect's factory gets, on ECS and Lambda alike.
func effectEnv(s settings, cl *clients, log *slog.Logger, lookup func(string) (string, bool)) Env {
	cfg := cl.cfg.Copy()
	// Clipped, so that an effect appending to its APIOptions gets an array
	// of its own instead of writing into the worker's.
	cfg.APIOptions = slices.Clip(cfg.APIOptions)
	return Env{
		DynamoDB: cl.dynamo, Log: log, LedgerTable: s.ledgerTable, LedgerConfirm: s.ledgerConfirm, HTTPURL: s.httpURL, Lookup: lookup,
		AWS: cfg, HTTPClient: newEffectHTTPClient(s.concurrency),
	}
}

// Timeouts of the effects' HTTP client. A call that hangs would hold its
// message's lease and its FIFO group; the effect's context bounds it too.
const (
	effectHTTPTimeout          = 30 * time.Second
	effectHTTPDialTimeout      = 5 * time.Second
	effectHTTPHandshakeTimeout = 10 * time.Second
	effectHTTPHeaderTimeout    = 25 * time.Second
)

// awsCalls is how many AWS calls the worker makes at once, at most, in
// steady state: a commit per handler, a long poll per receiver of each
// queue (the batches of deletes and extensions are few and short).
func (s *settings) awsCalls() int {
	receivers, commits := s.receivers, s.concurrency
	if s.groupCommit > 0 {
		// A handler gives its slot back while its commit waits: the
		// commits under way can outnumber the handlers.
		commits = 2 * s.concurrency
	}
	if receivers == 0 {
		receivers = pool.ReceiversFor(s.concurrency, s.groupCommit > 0)
	}
	return commits + receivers*max(len(s.queues), 1)
}

// newEffectHTTPClient keeps as many idle connections per host as handlers
// can run at once: http.DefaultTransport keeps 2, and a worker calling one
// downstream from 32 handlers would open and close connections all the time.
func newEffectHTTPClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: effectHTTPDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = effectHTTPHandshakeTimeout
	t.ResponseHeaderTimeout = effectHTTPHeaderTimeout
	t.MaxIdleConnsPerHost = max(concurrency, 2)
	t.MaxIdleConns = max(t.MaxIdleConns, t.MaxIdleConnsPerHost)
	return &http.Client{Timeout: effectHTTPTimeout, Transport: t}
}

func logProgress(ctx context.Context, log *slog.Logger, stats func() exactly.Stats, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t := stats()
		if t.Received == last {
			continue // quiet while idle
		}
		last = t.Received
		log.Info("progress", "received", t.Received, "applied", t.Applied, "duplicates", t.Duplicates,
			"retries", t.Retries, "permanent_failures", t.PermanentFailures, "conflicts", t.Conflicts,
			"in_flight", t.InFlight)
	}
}

// queueNames are the short names of --queue.
func (s *settings) queueNames() []string {
	names := make([]string, len(s.queues))
	for i, q := range s.queues {
		names[i] = sqsmsg.QueueName(q)
	}
	return names
}
