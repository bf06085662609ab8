package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/telemetry"
	"github.com/exactlyonce/exactly/outbox"
)

// relaySettings are the relay's settings.
type relaySettings struct {
	table         string
	poll          time.Duration
	retention     time.Duration
	perGroup      int
	groupBatch    int
	concurrency   int
	metricsAddr   string
	metricsFormat string
	emfNamespace  string
	emfInterval   time.Duration
	logFormat     string
	logLevel      string
}

func (s *relaySettings) define(fs *config.Set, onLambda bool) {
	fs.String(&s.table, "outbox-table", "WORKER_OUTBOX_TABLE", DefaultOutboxTable, "DynamoDB outbox table to publish")
	fs.Duration(&s.poll, "poll", "WORKER_RELAY_POLL", outbox.DefaultPoll, "how long to wait before reading the pending index again after a sweep that found nothing (10ms to 1m)")
	fs.Duration(&s.retention, "retention", "WORKER_RELAY_RETENTION", outbox.DefaultRetention, "how long a published message stays in the table (its TTL) for worker outbox to show (1m to 365 days)")
	fs.Int(&s.perGroup, "per-group", "WORKER_RELAY_PER_GROUP", 10, "messages of one group published per sweep (1 to 50)")
	fs.Int(&s.groupBatch, "group-batch", "WORKER_RELAY_GROUP_BATCH", 1, "messages of one group in one SendMessageBatch, in order (1 to 10); above 1 a hot group is faster, and an entry failing inside SQS may reorder its group: detected, held and counted (docs/OUTBOX.md)")
	fs.Int(&s.concurrency, "concurrency", "WORKER_RELAY_CONCURRENCY", outbox.DefaultConcurrency, "groups read, published and recorded at once (1 to 1000): with many groups it bounds the rate, about this many ÷ a group's round trips (docs/SCALING.md)")
	fs.String(&s.logFormat, "log-format", "WORKER_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal)")
	fs.String(&s.logLevel, "log-level", "WORKER_LOG_LEVEL", "info", "debug, info, warn or error")
	fs.String(&s.emfNamespace, "emf-namespace", "WORKER_EMF_NAMESPACE", exactly.DefaultEMFNamespace, "CloudWatch namespace of the EMF metrics")
	if onLambda {
		fs.String(&s.metricsFormat, "metrics-format", "WORKER_METRICS_FORMAT", "emf", "emf: each invocation's metrics as an EMF line on stdout (dimension OutboxTable); none: off")
		return
	}
	fs.String(&s.metricsFormat, "metrics-format", "WORKER_METRICS_FORMAT", "prometheus", "prometheus (/metrics on --metrics-addr), emf (EMF lines on stdout every --emf-interval) or both")
	fs.Duration(&s.emfInterval, "emf-interval", "WORKER_EMF_INTERVAL", exactly.DefaultEMFInterval, "how often the EMF line is written")
	fs.String(&s.metricsAddr, "metrics-addr", "WORKER_METRICS_ADDR", DefaultMetricsAddr, "address of /healthz, /readyz and /metrics (empty: off)")
}

func (s *relaySettings) validate(fs *config.Set, onLambda bool) error {
	formats := []string{"prometheus", "emf", "both"}
	if onLambda {
		formats = []string{"emf", "none"}
	}
	switch {
	case s.table == "":
		return config.Errorf("%s is required: the outbox table's name", fs.Name("outbox-table"))
	case s.poll < 10*time.Millisecond || s.poll > time.Minute:
		return config.Errorf("%s %s: want 10ms to 1m", fs.Name("poll"), s.poll)
	case s.retention < time.Minute || s.retention > 365*24*time.Hour:
		return config.Errorf("%s %s: want 1m to 8760h (365 days)", fs.Name("retention"), s.retention)
	case s.perGroup < 1 || s.perGroup > 50:
		return config.Errorf("%s %d: want 1 to 50", fs.Name("per-group"), s.perGroup)
	case s.groupBatch < 1 || s.groupBatch > 10:
		return config.Errorf("%s %d: want 1 to 10", fs.Name("group-batch"), s.groupBatch)
	case s.concurrency < 1 || s.concurrency > 1000:
		return config.Errorf("%s %d: want 1 to 1000", fs.Name("concurrency"), s.concurrency)
	case !slices.Contains(formats, s.metricsFormat):
		return config.Errorf("%s %q: want %s", fs.Name("metrics-format"), s.metricsFormat, strings.Join(formats, ", "))
	case !onLambda && s.metricsFormat != "prometheus" && s.emfInterval <= 0:
		return config.Errorf("%s must be positive", fs.Name("emf-interval"))
	}
	return nil
}

// relay is the outbox.Relay the settings describe, on the clients given.
func (s *relaySettings) relay(db outbox.API, q outbox.SQS, sn outbox.SNS, log *slog.Logger) *outbox.Relay {
	return &outbox.Relay{DB: db, SQS: q, SNS: sn, Table: s.table, Poll: s.poll, Retention: s.retention,
		PerGroup: s.perGroup, GroupBatch: s.groupBatch, Concurrency: s.concurrency, Logger: log}
}

// relayCommand publishes the outbox: a loop over the pending index on ECS
// or any host; on Lambda, a handler of the table's stream (the groups its
// records name) and of scheduled events (a sweep of the pending index).
func relayCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	api, _ := lookup(runtimeAPIEnv)
	onLambda := api != ""
	var s relaySettings
	fs := config.NewSet("worker relay", stderr, lookup)
	s.define(fs, onLambda)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := s.validate(fs, onLambda); err != nil {
		if onLambda {
			reportInitError(ctx, api, err)
		}
		return err
	}
	log, err := telemetry.NewLogger(stderr, s.logFormat, s.logLevel)
	if err != nil {
		return config.Errorf("%s", err)
	}
	var reg *prometheus.Registry
	if !onLambda {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		telemetry.RegisterBuildInfo(reg, Version)
	}
	var reqs *telemetry.Requests
	if reg != nil {
		reqs = telemetry.NewRequests(reg)
	}
	cl, err := newClients(ctx, lookup, reqs)
	if err != nil {
		return err
	}
	defer cl.close()
	var emf io.Writer
	if s.metricsFormat == "emf" || s.metricsFormat == "both" {
		emf = stdout
	}
	var registerer prometheus.Registerer
	if reg != nil {
		registerer = reg
	}
	metrics := telemetry.NewOutboxMetrics(registerer, s.table, emf, s.emfNamespace)
	relay := s.relay(cl.dynamo, cl.sqs, cl.sns, log)
	if onLambda {
		startLambda(ctx, relayLambdaHandler(relay, metrics, log))
		return nil
	}
	return runRelay(ctx, relay, metrics, reg, s, log)
}

func runRelay(ctx context.Context, relay *outbox.Relay, metrics *telemetry.OutboxMetrics, reg *prometheus.Registry, s relaySettings, log *slog.Logger) error {
	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopBG(); bg.Wait() }()
	if s.metricsAddr != "" {
		var gatherer prometheus.Gatherer = reg
		if s.metricsFormat == "emf" {
			gatherer = nil
		}
		srv, err := telemetry.Listen(s.metricsAddr, gatherer)
		if err != nil {
			return config.Errorf("--metrics-addr %q: %v", s.metricsAddr, err)
		}
		bg.Go(func() { srv.Serve(bgCtx, log) })
		srv.SetReady(true)
		log.Info("serving /healthz, /readyz and /metrics", "addr", srv.Addr())
	}
	if s.metricsFormat != "prometheus" {
		stop, flushed := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(flushed)
			telemetry.FlushEvery(stop, s.emfInterval, metrics.Flush, log)
		}()
		defer func() { close(stop); <-flushed }() // the last period's line, once stopped
	}
	relay.OnRound = func(r outbox.Round) { metrics.Observe(r, true) }
	log.Info("relay started", "version", Version, "outbox_table", s.table, "poll_ms", s.poll.Milliseconds(), "retention_ms", s.retention.Milliseconds())
	err := relay.Run(ctx)
	log.Info("relay stopped")
	return err
}

// relayEvent is what the relay function is invoked with: stream records
// (DynamoDB Streams) or a scheduled event (no records).
type relayEvent struct {
	Records []events.DynamoDBEventRecord `json:"Records"`
}

// relayLambdaHandler drains the groups a stream batch names (any record of
// a group wakes it: the relay reads the group itself, in order), or sweeps
// the pending index for anything else (the schedule, the safety net for a
// record that was lost or gave up). An error makes Lambda retry the batch;
// what was published is recorded, so a retry publishes only what is left.
func relayLambdaHandler(relay *outbox.Relay, metrics *telemetry.OutboxMetrics, log *slog.Logger) func(context.Context, json.RawMessage) error {
	return func(ctx context.Context, raw json.RawMessage) error {
		var ev relayEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("relay: cannot read the event: %w", err)
		}
		var round outbox.Round
		var err error
		sweep := len(ev.Records) == 0
		if sweep {
			round, err = relay.Sweep(ctx)
		} else {
			var pks []string
			for _, r := range ev.Records {
				if v, ok := r.Change.Keys[outboxschema.AttrPK]; ok && v.DataType() == events.DataTypeString {
					pks = append(pks, v.String())
				}
			}
			round, err = relay.Drain(ctx, pks)
		}
		metrics.Observe(round, sweep)
		if ferr := metrics.Flush(time.Now()); ferr != nil {
			log.Warn("cannot write EMF line", "err", ferr)
		}
		log.Info("relay invocation", "sweep", sweep, "groups", round.Groups, "published", round.Published,
			"duplicates", round.Duplicates, "failed", round.Failed, "held", round.Held, "errors", round.Errors, "lag_ms", round.Lag.Milliseconds())
		if err != nil {
			return err
		}
		if round.Errors > 0 {
			return fmt.Errorf("relay: %d groups left for a retry", round.Errors)
		}
		return nil
	}
}

// outboxCommand lists an outbox's pending messages, or a group's recent
// ones; its subcommands release a held group or drop its held message.
func outboxCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	if len(args) > 0 && (args[0] == "release" || args[0] == "drop") {
		return outboxHeldCommand(ctx, args[0], args[1:], stdout, stderr, lookup)
	}
	var table, queue, group string
	var limit int
	fs := config.NewSet("worker outbox", stderr, lookup)
	fs.String(&table, "outbox-table", "WORKER_OUTBOX_TABLE", DefaultOutboxTable, "DynamoDB outbox table")
	fs.String(&queue, "queue", "", "", "with --group: list this group's messages still in the table (published ones until their TTL), not the pending ones")
	fs.String(&group, "group", "", "", "message group of --queue")
	fs.Int(&limit, "limit", "", 50, "messages to list at most (and each held group's held message past them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if group != "" && queue == "" {
		return config.Errorf("--group needs --queue (the queue URL)")
	}
	if limit < 1 || limit > 1000 {
		return config.Errorf("--limit %d: want 1 to 1000", limit)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	var items []outbox.Item
	if queue != "" {
		items, err = outbox.ListGroup(ctx, cl.dynamo, table, queue, group, limit)
	} else {
		items, err = outbox.ListPending(ctx, cl.dynamo, table, limit)
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tGROUP\tSEQ\tID\tCREATED\tSTATE")
	for _, it := range items {
		state := "pending"
		switch {
		case it.Held != "":
			state = "held: " + it.Held
		case it.Dropped != "":
			state = "dropped " + it.SentAt.UTC().Format(time.RFC3339) + ": " + it.Dropped
		case it.Failed != "":
			state = "failed: " + it.Failed
		case !it.SentAt.IsZero():
			state = "published " + it.SentAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", it.Queue, it.Group, it.Seq, it.ID, it.Created.UTC().Format(time.RFC3339), state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(items) == 0 && queue == "" {
		fmt.Fprintln(stdout, "nothing pending")
	}
	return nil
}

// outboxHeldUsage is the help of worker outbox release and drop.
const outboxHeldUsage = `The relay holds a message group when SQS refuses one of its messages for a
reason the producer could not know (the queue's MaximumMessageSize lowered
under it, ...): it publishes nothing more of the group, and worker outbox
shows the message as "held: <why>". Decide with:

  worker outbox release --queue URL --group G --id ID
      publish the group again from the held message, as it is (after
      fixing the cause: raising MaximumMessageSize, ...). Refused again,
      it is held again. ID must be the held message's id, as worker
      outbox shows it: a group held since at another message (or for
      another reason) is not released unseen.
  worker outbox drop --queue URL --group G --id ID
      skip the held message (ID must be its id, as worker outbox shows
      it): it is marked dropped, never published, and the rest of the
      group follows. Whatever it announced is yours to handle.
`

// outboxHeldCommand is worker outbox release and worker outbox drop.
func outboxHeldCommand(ctx context.Context, sub string, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var table, queue, group, id string
	fs := config.NewSet("worker outbox "+sub, stderr, lookup)
	fs.String(&table, "outbox-table", "WORKER_OUTBOX_TABLE", DefaultOutboxTable, "DynamoDB outbox table")
	fs.String(&queue, "queue", "", "", "queue URL of the held group")
	fs.String(&group, "group", "", "", "the held message group")
	fs.String(&id, "id", "", "", "id of the held message to "+sub+" (a guard: worker outbox shows it)")
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
		fmt.Fprint(stderr, outboxHeldUsage+"\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case queue == "" || group == "":
		return config.Errorf("worker outbox %s needs --queue (the queue URL) and --group", sub)
	case id == "":
		return config.Errorf("worker outbox %s needs --id: the held message's id, as worker outbox --queue --group shows it", sub)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	if sub == "release" {
		if err := outbox.Release(ctx, cl.dynamo, table, queue, group, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "released group %s of %s: the relay publishes it again from the held message\n", group, queue)
		return nil
	}
	if err := outbox.Drop(ctx, cl.dynamo, table, queue, group, id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dropped message %s of group %s of %s: marked dropped, never published; the rest of the group follows\n", id, group, queue)
	return nil
}
