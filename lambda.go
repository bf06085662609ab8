package exactly

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsevent"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// lambdaLease is the claim lease when an invocation has no deadline, which
// Lambda always sets; with one, the lease ends before the deadline.
const lambdaLease = 30 * time.Second

// LambdaHandler handles the SQS events of a Lambda event source mapping
// through the same exactly-once path as the Worker, and answers with the
// batchItemFailures that tell the mapping which messages to keep (turn on
// ReportBatchItemFailures). A FIFO group runs in order and a failure holds
// the rest of its group back; groups run in parallel.
type LambdaHandler struct {
	h   *sqsevent.Handler
	emf *telemetry.EMF // nil: off
	log *slog.Logger
}

// NewLambdaHandler checks cfg and what it names, as New does, once per cold
// start: the listed queues' attributes, the dedup table, the permissions.
// Pass its Handle to lambda.Start. Every problem it finds is a
// *ConfigError.
func NewLambdaHandler(ctx context.Context, cfg Config) (*LambdaHandler, error) {
	s, err := check(cfg, true)
	if err != nil {
		return nil, err
	}
	type read struct {
		listed map[string]queueInfo
		infos  []queueInfo
	}
	r, err := startup(ctx, s.log, s.rand, "read the queues", func() (read, error) {
		l, i, err := s.lambdaQueues(ctx)
		return read{l, i}, err
	})
	if err != nil {
		return nil, err
	}
	listed, infos := r.listed, r.infos
	warnWiderDLQScope(ctx, s.log, s.SQS, infos)
	store, err := startup(ctx, s.log, s.rand, "check the dedup table", func() (*dedup.Store, error) { return s.store(ctx) })
	if err != nil {
		return nil, err
	}
	// The event source mapping receives, deletes and hands messages back;
	// the function itself only writes DynamoDB (and moves to DLQs).
	if err := preflight(ctx, s.log, s.SQS, s.DynamoDB, nil, s.Table); err != nil {
		return nil, err
	}
	res := &queueResolver{client: s.SQS, listed: listed, moveToDLQ: !s.LeaveToRedrivePolicy, scope: s.Lambda.DedupScope, log: s.log, byARN: map[string]*queueRead{}}
	defaultPerGroup := s.Lambda.DedupScope == "group"
	proc := s.processor(store, lambdaLease, func(m effect.Message) dedup.Scope {
		perGroup := defaultPerGroup
		if q, ok := listed[m.QueueName]; ok {
			perGroup = q.perGroup
		}
		return dedup.Scope{Namespace: s.Namespace, Queue: m.QueueName, PerGroup: perGroup}
	})
	metrics, err := s.metrics()
	if err != nil {
		return nil, err
	}
	emf := s.emf()
	failRest, _ := sqsevent.ParseFailRest(s.Lambda.FailRest)
	hc := sqsevent.Config{
		Observer:  hookObserver{Metrics: metrics, hooks: s.Hooks, emf: emf},
		Processor: proc, FailRest: failRest, Concurrency: s.Concurrency, Log: s.log,
		LeaseMargin: s.Lambda.LeaseMargin, MinLease: s.Lambda.MinLease, Step: s.Test.Step,
		RetryInPlace: s.RetryInPlace, Rand: s.rand,
		Resolve: func(ctx context.Context, arn string) (sqsevent.Queue, error) {
			q, err := res.resolve(ctx, arn)
			return sqsevent.Queue{URL: q.url, PerGroup: q.perGroup, MaxReceiveCount: q.maxReceive()}, err
		},
	}
	if !s.LeaveToRedrivePolicy {
		hc.MoveToDLQ = func(ctx context.Context, rec events.SQSMessage, cause error) error {
			return moveToDLQ(ctx, s.SQS, res, rec, cause)
		}
	}
	h, err := sqsevent.New(hc)
	if err != nil {
		return nil, err
	}
	return &LambdaHandler{h: h, emf: emf, log: s.log}, nil
}

// Handle handles one batch. Its error is nil: failures are reported per
// message in the response. With Config.EMF on, the batch's metrics are
// written before it returns.
func (l *LambdaHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp, err := l.h.Handle(ctx, ev)
	if l.emf != nil {
		if ferr := l.emf.Flush(time.Now()); ferr != nil {
			l.log.Warn("cannot write the EMF metrics", "err", ferr)
		}
	}
	return resp, err
}

// lambdaQueues reads the attributes of the listed queues, once at cold
// start: an event carries its queue's ARN but not its DeduplicationScope.
// A queue that says messageGroup scopes its keys per group; a
// Lambda.DedupScope that contradicts a listed queue is a ConfigError.
func (s *settings) lambdaQueues(ctx context.Context) (map[string]queueInfo, []queueInfo, error) {
	byName := map[string]queueInfo{}
	var infos []queueInfo
	for _, url := range s.Queues {
		qi, err := readQueue(ctx, s.SQS, url)
		if err != nil {
			return nil, nil, err
		}
		if sc := s.Lambda.DedupScope; sc != "" && (sc == "group") != qi.perGroup {
			return nil, nil, configErr("Lambda.DedupScope", " %s contradicts queue %s, whose DeduplicationScope is %s: keys must be scoped as the queue deduplicates (leave Config.Lambda.DedupScope empty to follow the queue)",
				sc, qi.name, orQueue(scopeName(qi)))
		}
		if !s.LeaveToRedrivePolicy {
			if qi.dlq, err = deadLetterURL(ctx, s.SQS, qi.redrive); transient(err) {
				return nil, nil, err // SQS having a bad minute: start-up tries again
			} else if err != nil {
				return nil, nil, configErr("LeaveToRedrivePolicy", ": queue %s: %w", qi.name, err)
			}
		}
		byName[qi.name] = qi
		infos = append(infos, qi)
	}
	return byName, infos, nil
}

func scopeName(q queueInfo) string {
	switch {
	case q.perGroup:
		return "messageGroup"
	case q.fifo:
		return "queue"
	}
	return ""
}

// queueResolver knows the event source queues: the listed ones as read at
// cold start, and any other the first time one of its events arrives
// (GetQueueUrl and GetQueueAttributes), for the container's life. A failed
// read is not kept: the next event tries again. Safe for concurrent use.
type queueResolver struct {
	client    SQS
	listed    map[string]queueInfo
	moveToDLQ bool
	scope     string // Lambda.DedupScope: "", queue or group
	log       *slog.Logger

	mu    sync.Mutex
	byARN map[string]*queueRead
}

// queueRead is one read of a queue's attributes; done is closed when q and
// err are set.
type queueRead struct {
	done chan struct{}
	q    queueInfo
	err  error
}

// resolve returns what is known of the queue with the given ARN, reading
// its attributes once. Concurrent first calls share one read.
func (r *queueResolver) resolve(ctx context.Context, arn string) (queueInfo, error) {
	if q, ok := r.listed[sqsevent.QueueName(arn)]; ok {
		return q, nil // listed: as configured and read at cold start
	}
	r.mu.Lock()
	c, ok := r.byARN[arn]
	if !ok {
		c = &queueRead{done: make(chan struct{})}
		r.byARN[arn] = c
		r.mu.Unlock()
		c.q, c.err = r.read(ctx, arn)
		if c.err != nil {
			r.mu.Lock()
			delete(r.byARN, arn)
			r.mu.Unlock()
		}
		close(c.done)
		return c.q, c.err
	}
	r.mu.Unlock()
	select {
	case <-c.done:
		return c.q, c.err
	case <-ctx.Done():
		return queueInfo{}, ctx.Err()
	}
}

// read asks SQS about a queue that is not listed.
func (r *queueResolver) read(ctx context.Context, arn string) (queueInfo, error) {
	p := strings.Split(arn, ":") // arn:partition:sqs:region:account:name
	if len(p) != 6 || p[5] == "" {
		return queueInfo{}, fmt.Errorf("event source %q is not an SQS queue ARN", arn)
	}
	name := p[5]
	got, err := r.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name), QueueOwnerAWSAccountId: aws.String(p[4])})
	if err != nil {
		return queueInfo{}, denied(fmt.Errorf("cannot find queue %s: %w", arn, err), "sqs:GetQueueUrl", arn)
	}
	q, err := readQueue(ctx, r.client, aws.ToString(got.QueueUrl))
	if err != nil {
		return queueInfo{}, err
	}
	if r.moveToDLQ && q.redrive != "" {
		if q.dlq, err = deadLetterURL(ctx, r.client, q.redrive); err != nil {
			return queueInfo{}, fmt.Errorf("queue %s: %w", name, err)
		}
	}
	if r.scope != "" && (r.scope == "group") != q.perGroup {
		r.log.Warn("a queue that is not listed contradicts the configured dedup scope: its keys follow the queue's DeduplicationScope",
			"queue", name, "dedup_scope", r.scope, "queue_dedup_scope", orQueue(scopeName(q)))
	}
	r.log.Info("queue that is not listed read", "queue", name, "fifo", q.fifo, "dedup_per_group", q.perGroup, "dlq", sqsmsg.QueueName(q.dlq))
	return q, nil
}

// moveToDLQ sends a record to its queue's dead-letter queue as it came:
// body, message attributes and, in a FIFO queue, its group; plus an
// idempotency-key attribute that keeps its dedup key, and a dedup id of its
// own (sqsmsg.DeadLetterCopy).
func moveToDLQ(ctx context.Context, client SQS, queues *queueResolver, rec events.SQSMessage, cause error) error {
	q, err := queues.resolve(ctx, rec.EventSourceARN)
	if err != nil {
		return err
	}
	if q.dlq == "" {
		return fmt.Errorf("queue %s has no redrive policy naming a dead-letter queue", rec.EventSourceARN)
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range rec.MessageAttributes {
		attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	m := effect.Message{ID: rec.MessageId, Group: rec.Attributes["MessageGroupId"], DedupID: rec.Attributes["MessageDeduplicationId"]}
	// With ten attributes already the copy cannot carry its dedup key: it is
	// not made, and the handler leaves the record to the redrive policy.
	in, err := sqsmsg.DeadLetterCopy(q.dlq, q.fifo, m, aws.String(rec.Body), attrs, cause, time.Now())
	if err != nil {
		return err
	}
	_, err = client.SendMessage(ctx, in)
	return err
}
