package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// Defaults of settings shared by run and lambda.
const (
	DedupTableDefault  = "exactly-dedup"
	LedgerTableDefault = "exactly-ledger"
	NamespaceDefault   = "exactly"
	DedupTTLDefault    = 24 * time.Hour
	MetricsAddrDefault = ":9090"
	// RetryInPlaceDefault: two retries in place (about 1 s and 2 s) ride
	// out a brief blip of a downstream without a trip through SQS.
	RetryInPlaceDefault = 2
)

// settings are the worker's settings, from flags and WORKER_* variables.
type settings struct {
	queues          []string
	table           string
	effect          string
	ledgerTable     string
	dedupKey        string
	namespace       string
	dedupTTL        time.Duration
	lease           time.Duration
	visibility      time.Duration
	concurrency     int
	receivers       int
	maxInFlight     int
	shutdownTimeout time.Duration
	moveToDLQ       bool
	metricsAddr     string
	httpURL         string
	logFormat       string
	logLevel        string
	progress        time.Duration
	waitTime        time.Duration
	ackDelay        time.Duration
	retryInPlace    int
	fifoFailRest    string // lambda only
	dedupScope      string // lambda only

	keys dedup.KeySource
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
	fs.String(&s.table, "table", "WORKER_DEDUP_TABLE", DedupTableDefault, "DynamoDB dedup table")
	fs.String(&s.effect, "effect", "WORKER_EFFECT", "", "effect to apply: "+strings.Join(effect.Names(), "|")+" or one registered in code (required)")
	fs.String(&s.ledgerTable, "ledger-table", "WORKER_LEDGER_TABLE", LedgerTableDefault, "DynamoDB table of the ledger effect")
	fs.String(&s.dedupKey, "dedup-key", "WORKER_DEDUP_KEY", "auto", "dedup key source: auto (idempotency-key attribute, else MessageDeduplicationId, else MessageId), attr:NAME, json:/pointer or body")
	fs.String(&s.namespace, "namespace", "WORKER_NAMESPACE", NamespaceDefault, "first part of every dedup key; workers that must dedup together share it")
	fs.Duration(&s.dedupTTL, "dedup-ttl", "WORKER_DEDUP_TTL", DedupTTLDefault, "how long a completed message suppresses its duplicates")
	fs.String(&s.httpURL, "http-url", "WORKER_HTTP_URL", "", "URL the http effect POSTs to")
	fs.String(&s.logFormat, "log-format", "WORKER_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal)")
	fs.String(&s.logLevel, "log-level", "WORKER_LOG_LEVEL", "info", "debug, info, warn or error")
	if forLambda {
		fs.Bool(&s.moveToDLQ, "move-to-dlq", "WORKER_MOVE_TO_DLQ", false, "send permanent failures straight to the queue's dead-letter queue instead of waiting for the redrive policy (needs --queue)")
	} else {
		// By default: a poison message that waits for the redrive policy holds
		// its FIFO group back, and the rest of the group, received along with
		// it each time, would reach maxReceiveCount and be dead-lettered too.
		fs.Bool(&s.moveToDLQ, "move-to-dlq", "WORKER_MOVE_TO_DLQ", true, "send permanent failures straight to the queue's dead-letter queue (from its redrive policy) instead of cycling them until maxReceiveCount; false leaves them to the redrive policy")
	}
	if forLambda {
		fs.Int(&s.concurrency, "concurrency", "WORKER_CONCURRENCY", LambdaConcurrencyDefault, "message groups of one batch handled at once")
		fs.String(&s.fifoFailRest, "fifo-fail-rest", "WORKER_FIFO_FAIL_REST", "group", "FIFO: what a failed message takes with it into batchItemFailures: group (the later messages of its group; other groups go on) or batch (every later message of the batch; the batch then runs one message at a time)")
		fs.String(&s.dedupScope, "dedup-scope", "WORKER_DEDUP_SCOPE", "", "queue or group: scope of dedup keys, as the queue's DeduplicationScope (queue or messageGroup); default: read from --queue, else queue")
		return
	}
	fs.Duration(&s.lease, "lease", "WORKER_LEASE", 0, "dedup lease per claim, extended by heartbeats (0: the queue's visibility timeout less a tenth, at least 1s)")
	fs.Duration(&s.visibility, "visibility", "WORKER_VISIBILITY", 0, "override the queue's visibility timeout used for heartbeats (0: read from the queue)")
	fs.Int(&s.concurrency, "concurrency", "WORKER_CONCURRENCY", pool.ConcurrencyDefault, "handlers running at once (message groups in parallel)")
	fs.Int(&s.receivers, "receivers", "WORKER_RECEIVERS", pool.ReceiversDefault, "concurrent long polls per queue")
	fs.Duration(&s.waitTime, "wait-time", "WORKER_WAIT_TIME", pool.WaitTimeDefault, "long-poll wait, 1s to 20s; a shutdown waits for polls under way to return (SQS would strand what they bring), so it bounds that wait too")
	fs.Duration(&s.ackDelay, "ack-delay", "WORKER_ACK_DELAY", pool.AckDelayDefault, "how long deletes and visibility changes wait to fill a batch of 10 (fewer SQS requests; a FIFO group's next receive waits for its deletes); with no other message of the queue held they go at once")
	fs.Int(&s.retryInPlace, "retry-in-place", "WORKER_RETRY_IN_PLACE", RetryInPlaceDefault, "retryable failures retried in place, with backoff, before the message goes back to SQS: the worker keeps it and the rest of its FIFO group hidden meanwhile, so that their receive counts do not climb towards maxReceiveCount (0: back to SQS at once)")
	fs.Int(&s.maxInFlight, "max-in-flight", "WORKER_MAX_IN_FLIGHT", 0, "messages received and not yet finished (0: 2×concurrency + 10 per receiver)")
	fs.Duration(&s.shutdownTimeout, "shutdown-timeout", "WORKER_SHUTDOWN_TIMEOUT", pool.ShutdownTimeoutDefault, "on SIGTERM, how long running handlers may finish (keep it below ECS stopTimeout)")
	fs.String(&s.metricsAddr, "metrics-addr", "WORKER_METRICS_ADDR", MetricsAddrDefault, "address of /healthz, /readyz and /metrics (empty: off)")
	fs.Duration(&s.progress, "progress", "WORKER_PROGRESS", 10*time.Second, "interval of the progress log line (0: off)")
}

// validate checks values; every error names the setting and the fix.
func (s *settings) validate(fs *config.Set, forLambda bool) error {
	if !forLambda && len(s.queues) == 0 {
		return config.Errorf("%s is required: give the URL of at least one SQS queue", fs.Name("queue"))
	}
	for _, q := range s.queues {
		if !strings.HasPrefix(q, "http://") && !strings.HasPrefix(q, "https://") {
			return config.Errorf("%s %q is not a queue URL: want https://sqs.<region>.amazonaws.com/<account>/<name>", fs.Name("queue"), q)
		}
	}
	if s.effect == "" {
		return config.Errorf("%s is required: one of %s", fs.Name("effect"), strings.Join(effect.Names(), ", "))
	}
	if _, ok := effect.Lookup(s.effect); !ok {
		return config.Errorf("%s %q is unknown: want one of %s", fs.Name("effect"), s.effect, strings.Join(effect.Names(), ", "))
	}
	if s.table == "" {
		return config.Errorf("%s must not be empty", fs.Name("table"))
	}
	keys, err := dedup.ParseKeySource(s.dedupKey)
	if err != nil {
		return config.Errorf("%s: %v", fs.Name("dedup-key"), err)
	}
	s.keys = keys
	if s.namespace == "" || strings.ContainsAny(s.namespace, "#%") {
		return config.Errorf("%s %q: want a non-empty name without '#' or '%%'", fs.Name("namespace"), s.namespace)
	}
	if s.dedupTTL < time.Minute {
		return config.Errorf("%s %s is too short: want at least 1m (SQS alone deduplicates for 5m; hours or days is the point)", fs.Name("dedup-ttl"), s.dedupTTL)
	}
	if s.concurrency < 1 {
		return config.Errorf("%s must be at least 1", fs.Name("concurrency"))
	}
	if forLambda {
		return s.validateLambda(fs)
	}
	if s.receivers < 1 {
		return config.Errorf("%s must be at least 1", fs.Name("receivers"))
	}
	if s.retryInPlace < 0 || s.retryInPlace > 20 {
		return config.Errorf("%s must be between 0 and 20", fs.Name("retry-in-place"))
	}
	if s.maxInFlight < 0 {
		return config.Errorf("%s must not be negative", fs.Name("max-in-flight"))
	}
	if s.waitTime < time.Second || s.waitTime > 20*time.Second || s.waitTime%time.Second != 0 {
		return config.Errorf("%s must be whole seconds from 1s to 20s (SQS's long-poll range)", fs.Name("wait-time"))
	}
	if s.ackDelay < time.Millisecond || s.ackDelay > 5*time.Second {
		return config.Errorf("%s must be between 1ms and 5s", fs.Name("ack-delay"))
	}
	if s.shutdownTimeout <= 0 {
		return config.Errorf("%s must be positive", fs.Name("shutdown-timeout"))
	}
	if s.lease < 0 || (s.lease > 0 && s.lease < 2*time.Second) {
		return config.Errorf("%s must be 0 (the queue's visibility timeout) or at least 2s", fs.Name("lease"))
	}
	if s.visibility < 0 || s.visibility > 12*time.Hour {
		return config.Errorf("%s must be between 0 and 12h", fs.Name("visibility"))
	}
	return nil
}

func runCommand(ctx context.Context, force <-chan struct{}, args []string, stderr io.Writer, lookup func(string) (string, bool)) error {
	var s settings
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
	metrics := telemetry.NewMetrics()
	cl, err := newClients(ctx, lookup, telemetry.NewRequests(metrics.Registry))
	if err != nil {
		return err
	}
	queues, scopes, err := describeQueues(ctx, log, cl.sqs, s)
	if err != nil {
		return err
	}
	store := dedup.NewStore(cl.dynamo, s.table)
	if err := store.Check(ctx); err != nil {
		if d := denied(err, "dynamodb:DescribeTable and dynamodb:DescribeTimeToLive", "table "+s.table); d != err {
			return d
		}
		return config.Errorf("%s: %v", fs.Name("table"), err)
	}
	if err := preflight(ctx, log, cl.sqs, cl.dynamo, queues, s.table); err != nil {
		return err
	}
	eff, err := buildEffect(s, cl, log, lookup)
	if err != nil {
		return err
	}
	proc := &process.Processor{
		Store: store, Effect: eff, Keys: s.keys, TTL: s.dedupTTL, Log: log,
		Lease: 30 * time.Second,
		Scope: func(m effect.Message) dedup.Scope { return scopes[m.QueueURL] },
	}
	p, err := pool.New(pool.Config{
		Client: cl.sqs, Queues: queues, Processor: proc,
		Concurrency: s.concurrency, MaxInFlight: s.maxInFlight, ShutdownTimeout: s.shutdownTimeout, WaitTime: s.waitTime, AckDelay: s.ackDelay,
		RetryInPlace: s.retryInPlace, Log: log, Observer: metrics,
	})
	if err != nil {
		return err
	}

	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopBG(); bg.Wait() }()
	if s.metricsAddr != "" {
		srv, err := telemetry.Listen(s.metricsAddr, metrics)
		if err != nil {
			return config.Errorf("%s %q: %v", fs.Name("metrics-addr"), s.metricsAddr, err)
		}
		srv.SetReady(true)
		bg.Go(func() { srv.Serve(bgCtx, log) })
		log.Info("serving /healthz, /readyz and /metrics", "addr", srv.Addr())
	}
	if s.progress > 0 {
		bg.Go(func() { logProgress(bgCtx, log, metrics.Totals(), s.progress) })
	}
	bg.Go(func() {
		select {
		case <-force:
			log.Warn("second signal: cancelling running handlers now")
			p.Force()
		case <-bgCtx.Done():
		}
	})
	names := make([]string, len(queues))
	for i, q := range queues {
		names[i] = pool.QueueName(q.URL)
	}
	log.Info("worker started", "version", Version, "queues", strings.Join(names, ","), "effect", s.effect,
		"table", s.table, "concurrency", s.concurrency, "dedup_key", s.keys.String(), "dedup_ttl", s.dedupTTL)
	err = p.Run(ctx)
	t := metrics.Totals()
	log.Info("worker stopped", "received", t.Received.Load(), "applied", t.Applied.Load(), "duplicates", t.Duplicates.Load(),
		"retries", t.Retries.Load(), "permanent_failures", t.Permanent.Load(), "conflicts", t.Conflicts.Load())
	return err
}

// describeQueues reads each queue's attributes once at start-up: FIFO, the
// deduplication scope (dedup keys are scoped the same way), the visibility
// timeout (heartbeats) and the dead-letter queue.
func describeQueues(ctx context.Context, log *slog.Logger, client *sqs.Client, s settings) ([]pool.Queue, map[string]dedup.Scope, error) {
	var queues []pool.Queue
	var dlqs []queueDLQ
	scopes := map[string]dedup.Scope{}
	for _, url := range s.queues {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			var nf *sqstypes.QueueDoesNotExist
			if errors.As(err, &nf) {
				return nil, nil, config.Errorf("--queue (WORKER_QUEUES): queue %s does not exist: create it with `worker setup --queue %s` or the infra/terraform/modules/queue module", url, pool.QueueName(url))
			}
			return nil, nil, denied(fmt.Errorf("cannot read attributes of queue %s: %w", url, err), "sqs:GetQueueAttributes", url)
		}
		a := out.Attributes
		q := pool.Queue{URL: url, FIFO: a["FifoQueue"] == "true", Receivers: s.receivers, Lease: s.lease}
		vis, _ := strconv.Atoi(a["VisibilityTimeout"])
		q.Visibility = time.Duration(vis) * time.Second
		if s.visibility > 0 {
			q.Visibility = s.visibility
		}
		if q.Visibility < 2*time.Second {
			return nil, nil, config.Errorf("queue %s has a visibility timeout of %s: want at least 2s (set it on the queue, or --visibility)", pool.QueueName(url), q.Visibility)
		}
		switch {
		case a["RedrivePolicy"] == "":
			log.Warn("queue has no dead-letter queue: a permanent failure is retried until the message's retention period ends; give it a redrive policy",
				"queue", pool.QueueName(url))
		case s.moveToDLQ:
			dlq, err := deadLetterURL(ctx, client, a["RedrivePolicy"])
			if err != nil {
				return nil, nil, config.Errorf("--move-to-dlq (WORKER_MOVE_TO_DLQ): queue %s: %v", pool.QueueName(url), err)
			}
			q.DLQURL = dlq
		}
		queues = append(queues, q)
		scopes[url] = dedup.Scope{Namespace: s.namespace, Queue: pool.QueueName(url), PerGroup: a["DeduplicationScope"] == "messageGroup"}
		dlqs = append(dlqs, queueDLQ{name: pool.QueueName(url), fifo: q.FIFO, perGroup: scopes[url].PerGroup, redrive: a["RedrivePolicy"]})
	}
	warnWiderDLQScope(ctx, log, client, dlqs)
	return queues, scopes, nil
}

// queueURLGetter resolves queue names to URLs.
type queueURLGetter interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) //nolint:revive // the SDK's name
}

// deadLetterARN returns the dead-letter queue ARN of a RedrivePolicy.
func deadLetterARN(redrive string) (string, bool) {
	const key = `"deadLetterTargetArn":"`
	i := strings.Index(redrive, key)
	if i < 0 {
		return "", false
	}
	arn := redrive[i+len(key):]
	j := strings.IndexByte(arn, '"')
	if j < 0 {
		return "", false
	}
	return arn[:j], true
}

func deadLetterURL(ctx context.Context, client queueURLGetter, redrive string) (string, error) {
	arn, ok := deadLetterARN(redrive)
	if !ok {
		return "", errors.New("it has no redrive policy with a dead-letter queue")
	}
	parts := strings.Split(arn, ":") // arn:aws:sqs:region:account:name
	if len(parts) != 6 {
		return "", fmt.Errorf("cannot read dead-letter queue ARN %q", arn)
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &parts[5], QueueOwnerAWSAccountId: &parts[4]})
	if err != nil {
		return "", fmt.Errorf("cannot find dead-letter queue %s: %w", arn, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func buildEffect(s settings, cl *clients, log *slog.Logger, lookup func(string) (string, bool)) (effect.Effect, error) {
	factory, _ := effect.Lookup(s.effect)
	eff, err := factory(effectEnv(s, cl, log, lookup))
	if err != nil {
		return nil, config.Errorf("--effect %s: %v", s.effect, err)
	}
	return eff, nil
}

// effectEnv is what an effect's factory gets, on ECS and Lambda alike.
func effectEnv(s settings, cl *clients, log *slog.Logger, lookup func(string) (string, bool)) effect.Env {
	cfg := cl.cfg.Copy()
	// Clipped, so that an effect appending to its APIOptions gets an array
	// of its own instead of writing into the worker's.
	cfg.APIOptions = slices.Clip(cfg.APIOptions)
	return effect.Env{
		DynamoDB: cl.dynamo, Log: log, LedgerTable: s.ledgerTable, HTTPURL: s.httpURL, Lookup: lookup,
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

func logProgress(ctx context.Context, log *slog.Logger, t *telemetry.Totals, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last int64 = -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := t.Received.Load()
		if r == last {
			continue // quiet while idle
		}
		last = r
		log.Info("progress", "received", r, "applied", t.Applied.Load(), "duplicates", t.Duplicates.Load(),
			"retries", t.Retries.Load(), "permanent_failures", t.Permanent.Load(), "conflicts", t.Conflicts.Load(),
			"in_flight", t.InFlight.Load())
	}
}
