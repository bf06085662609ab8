// Package sqsevent runs SQS events from a Lambda event source mapping through
// the same exactly-once path as the ECS pool (internal/process) and answers
// with the batchItemFailures that tell the mapping which messages to keep.
//
// It is pure: a context and an events.SQSEvent in, an events.SQSEventResponse
// out. The event source mapping deletes the messages not reported; failed
// ones come back after the queue's visibility timeout, and the queue's
// redrive policy moves a message that keeps failing to its dead-letter queue.
//
// In a FIFO queue a failed message and every later message of its group in
// the batch are reported, and a group runs strictly in order; different
// groups run in parallel. With FailRestBatch, the batch runs in order, one
// message at a time, and the first failure reports everything after it, as
// AWS's own guidance for FIFO queues says. In a standard queue every message
// stands alone. A duplicate (its record COMPLETED for the same payload) is a
// success. A permanent failure is reported and left to the queue's redrive
// policy, or, with Config.MoveToDLQ, sent to the dead-letter queue at once.
//
// The dedup lease of a message never outlives the invocation: it ends
// LeaseMargin before the context's deadline, and the effect's context is
// cancelled at the same moment, so the margin is left for the commit. There
// is no heartbeat: Lambda stops the function at its deadline anyway.
package sqsevent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/internal/process"
)

// Defaults.
const (
	// DefaultConcurrency bounds the message groups (or standard-queue
	// messages) of one batch that run at once. A FIFO batch holds at most 10.
	DefaultConcurrency = 10
	// DefaultLeaseMargin is left between the end of a lease and the
	// invocation's deadline, for the commit.
	DefaultLeaseMargin = 2 * time.Second
	// DefaultMinLease: a message is not started with less lease than this
	// left before the margin; it is reported as failed and comes back.
	DefaultMinLease = time.Second
	// DefaultRetryBase and DefaultRetryMax bound a retry in place's wait
	// (Config.RetryInPlace), as the worker's pool does.
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// FailRest says which messages a failure in a FIFO queue takes with it.
type FailRest int

const (
	// FailRestGroup (default): the failed message and every later message of
	// its message group in the batch. Other groups go on.
	FailRestGroup FailRest = iota
	// FailRestBatch: the failed message and every later message of the batch,
	// whatever its group. The batch runs one message at a time, in order.
	FailRestBatch
)

func (f FailRest) String() string {
	if f == FailRestBatch {
		return "batch"
	}
	return "group"
}

// ParseFailRest parses group or batch.
func ParseFailRest(s string) (FailRest, error) {
	switch s {
	case "group", "":
		return FailRestGroup, nil
	case "batch":
		return FailRestBatch, nil
	}
	return 0, fmt.Errorf("%q: want group (the rest of the failed message's group) or batch (the rest of the whole batch)", s)
}

// Config configures a Handler.
type Config struct {
	// Processor runs one message exactly once. Required. Its Scope gets the
	// message with QueueName set from the event source ARN.
	Processor *process.Processor
	// Step, when set, is called by each lane of a batch before it takes a
	// slot ("lane <first message id>"), so that a simulation orders the
	// lanes that start together (exactly.TestConfig.Step). Nil: nothing.
	Step func(what string)
	// FailRest applies to FIFO queues. Default FailRestGroup.
	FailRest FailRest
	// Concurrency bounds the groups run at once. Default DefaultConcurrency.
	Concurrency int
	// LeaseMargin is left between a lease's end and the deadline. Default
	// DefaultLeaseMargin.
	LeaseMargin time.Duration
	// MinLease: less than this before the margin, a message is not started.
	// Default DefaultMinLease.
	MinLease time.Duration
	// RetryInPlace is how many times a retryable failure is tried again
	// within the invocation (after about RetryBase, then twice that, ...,
	// or the effect's RetryAfter) before the record is reported, as the
	// worker's pool does: the rest of its FIFO group waits in the batch
	// instead of going back with it, and no receive count rises. A retry
	// goes only while the invocation's time left, less LeaseMargin, covers
	// the wait and MinLease; a busy claim or a lost lease is reported at
	// once (another consumer has the message). The wait gives up the
	// lane's Concurrency slot: another lane runs meanwhile. 0: none.
	RetryInPlace int
	// RetryBase is the first wait of a retry in place. Default
	// DefaultRetryBase.
	RetryBase time.Duration
	// RetryMax caps a retry in place's wait; an effect asking for a longer
	// RetryAfter is reported at once. Default DefaultRetryMax.
	RetryMax time.Duration
	// Rand draws the retries' jitter; nil: the runtime's.
	Rand *jitter.Rand
	// QueueURL returns the URL of the queue with the given ARN, for effects.
	// Nil, or an empty answer: the AWS URL built from the ARN. Resolve's
	// answer, when it has a URL, wins.
	QueueURL func(arn string) string
	// Resolve, when set, tells what the handler needs to know of the queue
	// with the given ARN; it is called for each queue of a batch before any
	// of the queue's records runs, and should answer from a cache after the
	// first call (the worker reads a queue's attributes once per container).
	// Its PerGroup scopes the dedup keys of the queue's messages, whatever
	// the Processor's Scope says: an event names its queue but not the
	// queue's DeduplicationScope. When it fails, the queue's records in the
	// batch are reported, to come back. It must be safe for concurrent use.
	Resolve func(ctx context.Context, arn string) (Queue, error)
	// MoveToDLQ, when set, sends a permanently failed record to its queue's
	// dead-letter queue. A record moved is not reported, so the mapping
	// deletes it, and the rest of its FIFO group in the batch goes on (were it
	// reported, each redelivery would count toward maxReceiveCount). When the
	// move fails, the record and the rest of its group are reported and left
	// to the redrive policy. Nil: every permanent failure is left to
	// the redrive policy.
	MoveToDLQ func(ctx context.Context, rec events.SQSMessage, cause error) error
	// Log receives one line per failed message and one per batch.
	Log *slog.Logger
	// Observer, when set, is told of the records of each batch and of
	// what came of each one processed (metrics, hooks), as the pool tells
	// its own.
	Observer Observer
}

// Observer is told what the handler does, for metrics. Its methods must be
// cheap and safe for concurrent use.
type Observer interface {
	Received(queue string, n int)
	Done(queue string, r process.Result, took time.Duration)
	// ReturnedNearRedrive counts messages of queue reported without being
	// started (behind a failed message of their FIFO group, or with too
	// little time left) that had at most one receive left before the
	// queue's redrive policy moves them (see Queue.MaxReceiveCount).
	ReturnedNearRedrive(queue string, n int)
}

// Queue is what the handler knows of an event source queue (Config.Resolve).
type Queue struct {
	// URL is the queue's URL, for effects; "" for Config.QueueURL's answer.
	URL string
	// PerGroup: the queue's DeduplicationScope is messageGroup, so the same
	// dedup key in two message groups is two messages.
	PerGroup bool
	// MaxReceiveCount is the maxReceiveCount of the queue's redrive policy;
	// 0: none, or unknown. Every receive counts toward it, those of the
	// messages handed back unstarted included: the handler warns when one
	// of those is near it, and when a FIFO batch is as long as it.
	MaxReceiveCount int
}

// resolved is Resolve's answer for one queue of a batch.
type resolved struct {
	q   Queue
	err error
}

// Handler handles SQS events. It is safe for concurrent use.
type Handler struct {
	cfg Config
	// warned: the event source ARNs whose batch-as-long-as-maxReceiveCount
	// warning was given (once per queue for the container's life).
	warned sync.Map
}

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Processor == nil {
		return nil, errors.New("lambda: Config.Processor is required")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("lambda: Config.Concurrency %d must be positive", cfg.Concurrency)
	}
	if cfg.LeaseMargin == 0 {
		cfg.LeaseMargin = DefaultLeaseMargin
	}
	if cfg.MinLease == 0 {
		cfg.MinLease = DefaultMinLease
	}
	if cfg.LeaseMargin < 0 || cfg.MinLease < 0 {
		return nil, errors.New("lambda: Config.LeaseMargin and MinLease must not be negative")
	}
	if cfg.RetryInPlace < 0 || cfg.RetryBase < 0 || cfg.RetryMax < 0 {
		return nil, errors.New("lambda: Config.RetryInPlace, RetryBase and RetryMax must not be negative")
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Handler{cfg: cfg}, nil
}

// tally counts a batch's outcomes for its summary line.
type tally struct {
	mu                                                 sync.Mutex
	applied, duplicates, retried, permanent, conflicts int
	busy, notStarted, leasesLost, movedToDLQ           int
	inPlace                                            int // retries in place
}

// Handle processes one batch and reports the messages to keep in the queue.
// It never returns an error: a batch-level error would make Lambda retry the
// whole batch, including the messages that already succeeded.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := time.Now()
	done := make([]bool, len(ev.Records)) // may be deleted: committed, or a duplicate
	var t tally
	if o := h.cfg.Observer; o != nil {
		for _, r := range ev.Records {
			o.Received(queueName(r.EventSourceARN), 1)
		}
	}
	queues := h.resolve(ctx, ev.Records)
	lanes := h.lanes(ev.Records)
	h.warnLongLanes(ev.Records, lanes, queues)
	ran := make([]bool, len(ev.Records)) // started (or failed on its own)

	sem := make(chan struct{}, h.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Go(func() {
			if h.cfg.Step != nil {
				h.cfg.Step("lane " + ev.Records[lane[0]].MessageId)
			}
			sem <- struct{}{}
			held := true
			defer func() {
				if held {
					<-sem
				}
			}()
			// A retry in place waits without its slot: another lane runs
			// meanwhile. False: the invocation ended, and the lane stops.
			wait := func(d time.Duration) bool {
				<-sem
				held = false
				if !sleep(ctx, d) {
					return false
				}
				sem <- struct{}{}
				held = true
				return true
			}
			for i, idx := range lane {
				ok, stop, tried := h.one(ctx, ev.Records[idx], queues, &t, wait)
				done[idx], ran[idx] = ok, tried
				if !stop {
					continue
				}
				// The rest of the lane stays not done: reported.
				if n := len(lane) - i - 1; n > 0 {
					t.mu.Lock()
					t.notStarted += n
					t.mu.Unlock()
					h.cfg.Log.Info("later messages not started: an earlier message failed",
						"queue", queueName(ev.Records[idx].EventSourceARN), "group", ev.Records[idx].Attributes[attrGroup],
						"failed_message_id", ev.Records[idx].MessageId, "not_started", n, "fail_rest", h.cfg.FailRest.String())
				}
				return
			}
		})
	}
	wg.Wait()
	h.nearRedrive(ev.Records, done, ran, queues)

	var resp events.SQSEventResponse
	for i, r := range ev.Records {
		if !done[i] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	attrs := []any{
		"messages", len(ev.Records), "applied", t.applied, "duplicates", t.duplicates,
		"batch_item_failures", len(resp.BatchItemFailures), "retried", t.retried, "retried_in_place", t.inPlace, "permanent_failures", t.permanent,
		"conflicts", t.conflicts, "busy", t.busy, "not_started", t.notStarted, "leases_lost", t.leasesLost, "moved_to_dlq", t.movedToDLQ,
		"duration_ms", time.Since(start).Milliseconds(),
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, "aws_request_id", lc.AwsRequestID)
	}
	h.cfg.Log.Info("batch done", attrs...)
	return resp, nil
}

// System attribute names in Lambda's SQS event (the same as SQS's).
const (
	attrGroup        = "MessageGroupId"
	attrDedupID      = "MessageDeduplicationId"
	attrSequence     = "SequenceNumber"
	attrReceiveCount = "ApproximateReceiveCount"
	attrSentAt       = "SentTimestamp"
)

// lanes splits the batch into runs that go strictly in order: per message
// group in a FIFO queue (or one for the whole batch with FailRestBatch), one
// message each in a standard queue. Record order is the batch's order.
func (h *Handler) lanes(recs []events.SQSMessage) [][]int {
	var lanes [][]int
	index := map[string]int{}
	for i, r := range recs {
		if !isFIFO(r.EventSourceARN) {
			lanes = append(lanes, []int{i})
			continue
		}
		key := r.EventSourceARN
		if h.cfg.FailRest == FailRestGroup {
			key += "\x00" + r.Attributes[attrGroup]
		}
		if l, ok := index[key]; ok {
			lanes[l] = append(lanes[l], i)
			continue
		}
		index[key] = len(lanes)
		lanes = append(lanes, []int{i})
	}
	return lanes
}

// resolve asks Config.Resolve about each queue of the batch, once.
func (h *Handler) resolve(ctx context.Context, recs []events.SQSMessage) map[string]resolved {
	if h.cfg.Resolve == nil {
		return nil
	}
	out := map[string]resolved{}
	for _, r := range recs {
		arn := r.EventSourceARN
		if _, done := out[arn]; done || queueName(arn) == "" {
			continue
		}
		q, err := h.cfg.Resolve(ctx, arn)
		out[arn] = resolved{q: q, err: err}
		if err != nil {
			h.cfg.Log.Error("cannot read the queue's attributes: its messages are reported, to come back",
				"queue", queueName(arn), "err", err)
		}
	}
	return out
}

// one processes one record. ok: it may be deleted (not reported); stop: the
// rest of its lane must not run; tried: it was started, or failed on its
// own (not held back).
func (h *Handler) one(ctx context.Context, r events.SQSMessage, queues map[string]resolved, t *tally, wait func(time.Duration) bool) (ok, stop, tried bool) {
	log := h.cfg.Log.With("queue", queueName(r.EventSourceARN), "message_id", r.MessageId, "group", r.Attributes[attrGroup])
	m, err := h.message(r)
	if err != nil {
		if o := h.cfg.Observer; o != nil {
			o.Done(queueName(r.EventSourceARN), process.Result{Action: process.Fail, Err: err}, 0)
		}
		moved := h.permanent(ctx, r, log, t, 0, err)
		return moved, !moved, true
	}
	var scope *dedup.Scope
	if h.cfg.Resolve != nil {
		q := queues[r.EventSourceARN]
		if q.err != nil {
			t.count(func() { t.retried++ })
			log.Info("retry: reported as a batch item failure (the queue's attributes are unknown)", "err", q.err)
			return false, true, false
		}
		if q.q.URL != "" {
			m.QueueURL = q.q.URL
		}
		s := h.cfg.Processor.Scope(m)
		s.PerGroup = q.q.PerGroup
		scope = &s
	}
	var res process.Result
	var took time.Duration
	for attempt := 0; ; attempt++ {
		hooks := process.Hooks{Scope: scope}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, has := ctx.Deadline(); has {
			end := deadline.Add(-h.cfg.LeaseMargin)
			if time.Until(end) < h.cfg.MinLease || ctx.Err() != nil {
				if attempt > 0 { // its wait ran into the deadline
					t.count(func() { t.retried++ })
					log.Info("retry: reported as a batch item failure (no time left to retry in place)", "err", res.Err)
					return false, true, true
				}
				t.count(func() { t.notStarted++ })
				log.Warn("not started: too little time left before the invocation's deadline",
					"left_ms", time.Until(deadline).Milliseconds(), "lease_margin_ms", h.cfg.LeaseMargin.Milliseconds())
				return false, true, false
			}
			wctx, cancel = context.WithDeadline(ctx, end)
			// Commit retries end before the deadline, leaving time to answer.
			hooks.LeaseUntil, hooks.CommitBy = end, deadline.Add(-h.cfg.LeaseMargin/4)
		}
		start := time.Now()
		res = h.cfg.Processor.Process(wctx, m, hooks)
		cancel()
		took = time.Since(start)
		if o := h.cfg.Observer; o != nil {
			o.Done(m.QueueName, res, took)
		}
		after, again := h.inPlace(ctx, res, attempt)
		if !again {
			break
		}
		t.count(func() { t.inPlace++ })
		log.Info("retry in place", "attempt", attempt+1, "of", h.cfg.RetryInPlace, "after_ms", after.Milliseconds(),
			"dedup_key", res.Key, "err", res.Err)
		if !wait(after) {
			break // the invocation ends: reported below
		}
	}
	log = log.With("dedup_key", res.Key, "action", res.Action.String(), "duration_ms", took.Milliseconds())
	if res.Outcome != 0 {
		log = log.With("outcome", res.Outcome.String())
	}
	if res.TraceID != "" {
		log = log.With("trace_id", res.TraceID, "span_id", res.SpanID)
	}
	if res.LeaseLost {
		t.count(func() { t.leasesLost++ })
	}
	switch res.Action {
	case process.Delete:
		if res.Outcome == dedup.Duplicate {
			t.count(func() { t.duplicates++ })
			log.Info("duplicate: not run again") // as worker run logs it
		} else {
			t.count(func() { t.applied++ })
			log.Debug("done")
		}
		return true, false, true
	case process.Retry:
		if res.Outcome == dedup.Busy {
			t.count(func() { t.busy++ })
		} else {
			t.count(func() { t.retried++ })
		}
		log.Info("retry: reported as a batch item failure", "err", res.Err)
		return false, true, true
	}
	if res.Outcome == dedup.Conflict {
		t.count(func() { t.conflicts++ })
	}
	// A message moved to the dead-letter queue holds nothing back: the rest
	// of its lane goes on, as after SQS's own redrive.
	moved := h.permanent(ctx, r, log, t, m.ReceiveCount, res.Err)
	return moved, !moved, true
}

// inPlace says whether res, the outcome of attempt (0 the first), is tried
// again in place, and after how long: a retryable failure, while retries
// are left and the invocation's time covers the wait and a lease.
func (h *Handler) inPlace(ctx context.Context, res process.Result, attempt int) (time.Duration, bool) {
	if res.Action != process.Retry || attempt >= h.cfg.RetryInPlace ||
		res.Outcome == dedup.Busy || res.LeaseLost || res.After > h.cfg.RetryMax {
		return 0, false
	}
	wait := res.After
	if wait <= 0 {
		wait = h.cfg.Rand.Backoff(attempt+1, h.cfg.RetryBase, h.cfg.RetryMax)
	}
	if deadline, has := ctx.Deadline(); has && time.Until(deadline.Add(-h.cfg.LeaseMargin))-wait < h.cfg.MinLease {
		return 0, false
	}
	return wait, true
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// permanent handles a permanent failure: moved to the dead-letter queue when
// that is on and works (then ok), else reported for the redrive policy.
func (h *Handler) permanent(ctx context.Context, r events.SQSMessage, log *slog.Logger, t *tally, receiveCount int, cause error) (ok bool) {
	t.count(func() { t.permanent++ })
	if h.cfg.MoveToDLQ != nil {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := h.cfg.MoveToDLQ(mctx, r, cause)
		cancel()
		if err == nil {
			t.count(func() { t.movedToDLQ++ })
			log.Error("permanent failure: moved to the dead-letter queue", "err", cause)
			return true
		}
		log.Error("cannot move to the dead-letter queue; leaving it to the redrive policy", "err", err)
	}
	log.Error("permanent failure: left to the queue's redrive policy", "receive_count", receiveCount, "err", cause)
	return false
}

func (t *tally) count(f func()) {
	t.mu.Lock()
	f()
	t.mu.Unlock()
}

// message converts a record into the effect's view of it.
func (h *Handler) message(r events.SQSMessage) (effect.Message, error) {
	name := queueName(r.EventSourceARN)
	if name == "" {
		return effect.Message{}, fmt.Errorf("event source ARN %q is not an SQS queue's", r.EventSourceARN)
	}
	if r.MessageId == "" {
		return effect.Message{}, errors.New("record has no messageId")
	}
	url := ""
	if h.cfg.QueueURL != nil {
		url = h.cfg.QueueURL(r.EventSourceARN)
	}
	if url == "" {
		url = urlFromARN(r.EventSourceARN)
	}
	a := r.Attributes
	m := effect.Message{
		QueueURL:       url,
		QueueName:      name,
		ID:             r.MessageId,
		Body:           r.Body,
		Group:          a[attrGroup],
		DedupID:        a[attrDedupID],
		SequenceNumber: a[attrSequence],
		AWSTraceHeader: a["AWSTraceHeader"],
	}
	m.ReceiveCount, _ = strconv.Atoi(a[attrReceiveCount])
	if ms, err := strconv.ParseInt(a[attrSentAt], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	for k, v := range r.MessageAttributes {
		if v.StringValue == nil {
			continue
		}
		if m.Attributes == nil {
			m.Attributes = make(map[string]string, len(r.MessageAttributes))
		}
		m.Attributes[k] = *v.StringValue
	}
	return m, nil
}

// arnParts splits arn:partition:sqs:region:account:name.
func arnParts(arn string) (region, account, name string, ok bool) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" || p[5] == "" {
		return "", "", "", false
	}
	return p[3], p[4], p[5], true
}

// queueName returns the queue name of an SQS ARN, or "". It equals the last
// path element of the queue's URL, so ECS and Lambda workers of one queue
// build the same dedup keys.
func queueName(arn string) string {
	_, _, name, _ := arnParts(arn)
	return name
}

// QueueName returns the queue name in an SQS queue ARN, or "" when arn is not one.
func QueueName(arn string) string { return queueName(arn) }

func isFIFO(arn string) bool { return strings.HasSuffix(queueName(arn), ".fifo") }

// IsFIFO reports whether the queue ARN names a FIFO queue (its name ends in .fifo).
func IsFIFO(arn string) bool { return isFIFO(arn) }

// urlFromARN builds the queue URL that AWS uses for arn.
func urlFromARN(arn string) string {
	region, account, name, ok := arnParts(arn)
	if !ok {
		return ""
	}
	host := "sqs." + region + ".amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		host += ".cn"
	}
	return "https://" + host + "/" + account + "/" + name
}
