package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	sqslambda "github.com/exactlyonce/exactly/internal/lambda"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// LambdaConcurrencyDefault bounds the message groups of one batch handled at
// once on Lambda (a FIFO batch holds at most 10 messages).
const LambdaConcurrencyDefault = sqslambda.ConcurrencyDefault

// runtimeAPIEnv is set by Lambda for the function's process.
const runtimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

// lambdaLease is the claim lease when an invocation has no deadline, which
// Lambda always sets; with one, the lease ends before the deadline.
const lambdaLease = 30 * time.Second

func newLambdaSet(s *settings, lookup func(string) (string, bool)) *config.Set {
	fs := config.NewSet("worker lambda", nil, lookup)
	s.define(fs, true)
	return fs
}

// validateLambda checks the settings only Lambda has.
func (s *settings) validateLambda(fs *config.Set) error {
	if _, err := sqslambda.ParseFailRest(s.fifoFailRest); err != nil {
		return config.Errorf("%s %v", fs.Name("fifo-fail-rest"), err)
	}
	if s.moveToDLQ && len(s.queues) == 0 {
		return config.Errorf("%s needs %s: the queues' redrive policies name their dead-letter queues", fs.Name("move-to-dlq"), fs.Name("queue"))
	}
	switch s.dedupScope {
	case "", "queue", "group":
	default:
		return config.Errorf("%s %q: want queue (one key per queue, the queue's DeduplicationScope=queue) or group (per message group, DeduplicationScope=messageGroup)", fs.Name("dedup-scope"), s.dedupScope)
	}
	return nil
}

// startLambda hands the handler to aws-lambda-go's runtime loop, which talks
// to the Runtime API at AWS_LAMBDA_RUNTIME_API and never returns. Tests of
// the init path replace it.
var startLambda = func(ctx context.Context, handler any) {
	awslambda.StartWithOptions(handler, awslambda.WithContext(ctx))
}

// lambdaCommand is the function's init: everything that can be wrong with
// the configuration fails here, once per cold start, with one line (and an
// init error posted to the Runtime API, which Lambda shows as the cause).
func lambdaCommand(ctx context.Context, args []string, stderr io.Writer, lookup func(string) (string, bool)) error {
	h, err := initLambda(ctx, args, stderr, lookup)
	if err != nil {
		if api, _ := lookup(runtimeAPIEnv); api != "" && !errors.Is(err, flag.ErrHelp) {
			reportInitError(ctx, api, err)
		}
		return err
	}
	startLambda(ctx, h.Handle)
	return nil
}

func initLambda(ctx context.Context, args []string, stderr io.Writer, lookup func(string) (string, bool)) (*sqslambda.Handler, error) {
	var s settings
	fs := newLambdaSet(&s, lookup)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := s.validate(fs, true); err != nil {
		return nil, err
	}
	if api, _ := lookup(runtimeAPIEnv); api == "" {
		return nil, config.Errorf("worker lambda serves AWS Lambda's Runtime API, but %s is not set: deploy the binary as a Lambda function's bootstrap (on ECS or any host, use worker run)", runtimeAPIEnv)
	}
	log, err := telemetry.NewLogger(stderr, s.logFormat, s.logLevel)
	if err != nil {
		return nil, config.Errorf("%s", err)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return nil, err
	}
	queues, err := lambdaQueues(ctx, cl.sqs, fs, s)
	if err != nil {
		return nil, err
	}
	warnWiderDLQScope(ctx, log, cl.sqs, queues.dlqs)
	store := dedup.NewStore(cl.dynamo, s.table)
	if err := store.Check(ctx); err != nil {
		return nil, config.Errorf("%s: %v", fs.Name("table"), err)
	}
	// The event source mapping receives, deletes and hands messages back;
	// the function itself only writes DynamoDB.
	if err := preflight(ctx, log, cl.sqs, cl.dynamo, nil, s.table); err != nil {
		return nil, err
	}
	eff, err := buildEffect(s, cl, log, lookup)
	if err != nil {
		return nil, err
	}
	h, err := lambdaHandler(s, cl.sqs, store, eff, log, queues)
	if err != nil {
		return nil, err
	}
	scope := s.dedupScope
	if scope == "" {
		scope = "queue"
	}
	failRest, _ := sqslambda.ParseFailRest(s.fifoFailRest)
	log.Info("lambda worker ready", "version", Version, "effect", s.effect, "table", s.table,
		"queues", strings.Join(queues.names, ","), "dedup_scope_default", scope, "fifo_fail_rest", failRest.String(),
		"concurrency", s.concurrency, "dedup_key", s.keys.String(), "dedup_ttl", s.dedupTTL, "move_to_dlq", s.moveToDLQ)
	return h, nil
}

// lambdaSQS is the part of the SQS client the Lambda worker calls itself
// (the event source mapping receives and deletes). *sqs.Client and the
// in-memory SQS satisfy it.
type lambdaSQS interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) //nolint:revive // the SDK's name
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ lambdaSQS = (*sqs.Client)(nil)

// lambdaHandler wires the handler from checked settings, clients, the
// effect and the queues read at cold start.
func lambdaHandler(s settings, client lambdaSQS, store *dedup.Store, eff effect.Effect, log *slog.Logger, queues lambdaQueueSet) (*sqslambda.Handler, error) {
	failRest, _ := sqslambda.ParseFailRest(s.fifoFailRest)
	defaultPerGroup := s.dedupScope == "group"
	proc := &process.Processor{
		Store: store, Effect: eff, Keys: s.keys, TTL: s.dedupTTL, Log: log, Lease: lambdaLease,
		Scope: func(m effect.Message) dedup.Scope {
			perGroup := defaultPerGroup
			if q, ok := queues.byName[m.QueueName]; ok {
				perGroup = q.perGroup
			}
			return dedup.Scope{Namespace: s.namespace, Queue: m.QueueName, PerGroup: perGroup}
		},
	}
	res := newQueueResolver(client, queues, s, log)
	cfg := sqslambda.Config{
		Processor: proc, FailRest: failRest, Concurrency: s.concurrency, Log: log,
		Resolve: func(ctx context.Context, arn string) (sqslambda.Queue, error) {
			q, err := res.resolve(ctx, arn)
			return sqslambda.Queue{URL: q.url, PerGroup: q.perGroup}, err
		},
	}
	if s.moveToDLQ {
		cfg.MoveToDLQ = func(ctx context.Context, rec events.SQSMessage) error {
			return moveToDLQ(ctx, client, res, rec)
		}
	}
	return sqslambda.New(cfg)
}

// queueResolver knows the event source queues: those of --queue as read at
// cold start, and any other the first time one of its events arrives
// (GetQueueUrl and GetQueueAttributes), for the container's life. A failed
// read is not kept: the next event tries again. Safe for concurrent use.
type queueResolver struct {
	client    lambdaSQS
	listed    lambdaQueueSet
	moveToDLQ bool
	scope     string // --dedup-scope as given: "", queue or group
	log       *slog.Logger

	mu    sync.Mutex
	byARN map[string]*queueRead
}

// queueRead is one read of a queue's attributes; done is closed when q and
// err are set.
type queueRead struct {
	done chan struct{}
	q    lambdaQueue
	err  error
}

func newQueueResolver(client lambdaSQS, listed lambdaQueueSet, s settings, log *slog.Logger) *queueResolver {
	return &queueResolver{client: client, listed: listed, moveToDLQ: s.moveToDLQ, scope: s.dedupScope, log: log, byARN: map[string]*queueRead{}}
}

// resolve returns what is known of the queue with the given ARN, reading
// its attributes once. Concurrent first calls share one read.
func (r *queueResolver) resolve(ctx context.Context, arn string) (lambdaQueue, error) {
	if q, ok := r.listed.byName[sqslambda.QueueName(arn)]; ok {
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
		return lambdaQueue{}, ctx.Err()
	}
}

// read asks SQS about a queue that --queue does not list.
func (r *queueResolver) read(ctx context.Context, arn string) (lambdaQueue, error) {
	p := strings.Split(arn, ":") // arn:partition:sqs:region:account:name
	if len(p) != 6 || p[5] == "" {
		return lambdaQueue{}, fmt.Errorf("event source %q is not an SQS queue ARN", arn)
	}
	name := p[5]
	got, err := r.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name), QueueOwnerAWSAccountId: aws.String(p[4])})
	if err != nil {
		return lambdaQueue{}, denied(fmt.Errorf("cannot find queue %s: %w", arn, err), "sqs:GetQueueUrl", arn)
	}
	url := aws.ToString(got.QueueUrl)
	out, err := r.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameFifoQueue, sqstypes.QueueAttributeNameDeduplicationScope, sqstypes.QueueAttributeNameRedrivePolicy,
		},
	})
	if err != nil {
		return lambdaQueue{}, denied(fmt.Errorf("cannot read attributes of queue %s: %w", url, err), "sqs:GetQueueAttributes", url)
	}
	a := out.Attributes
	q := lambdaQueue{url: url, perGroup: a[string(sqstypes.QueueAttributeNameDeduplicationScope)] == "messageGroup", fifo: a[string(sqstypes.QueueAttributeNameFifoQueue)] == "true"}
	if r.moveToDLQ {
		if rp := a[string(sqstypes.QueueAttributeNameRedrivePolicy)]; rp != "" {
			if q.dlq, err = deadLetterURL(ctx, r.client, rp); err != nil {
				return lambdaQueue{}, fmt.Errorf("queue %s: %w", name, err)
			}
		}
	}
	if r.scope != "" && (r.scope == "group") != q.perGroup {
		r.log.Warn("queue not in --queue (WORKER_QUEUES) contradicts --dedup-scope (WORKER_DEDUP_SCOPE): its keys follow the queue's DeduplicationScope",
			"queue", name, "dedup_scope", r.scope, "queue_dedup_scope", orQueue(a[string(sqstypes.QueueAttributeNameDeduplicationScope)]))
	}
	r.log.Info("queue not in --queue (WORKER_QUEUES) read", "queue", name, "fifo", q.fifo, "dedup_per_group", q.perGroup, "dlq", pool.QueueName(q.dlq))
	return q, nil
}

type lambdaQueue struct {
	url      string
	perGroup bool   // DeduplicationScope=messageGroup
	fifo     bool   // FifoQueue
	dlq      string // dead-letter queue URL, with --move-to-dlq
}

type lambdaQueueSet struct {
	byName map[string]lambdaQueue
	names  []string
	dlqs   []queueDLQ
}

// lambdaQueues reads the attributes of the queues named by --queue, once at
// cold start: an event carries its queue's ARN but not its
// DeduplicationScope, and reading it per invocation would cost a call each
// time. A queue that says messageGroup scopes its keys per group whatever
// --dedup-scope says; a --dedup-scope given explicitly that contradicts a
// listed queue is a configuration error.
func lambdaQueues(ctx context.Context, client lambdaSQS, fs *config.Set, s settings) (lambdaQueueSet, error) {
	set := lambdaQueueSet{byName: map[string]lambdaQueue{}}
	for _, url := range s.queues {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameFifoQueue, sqstypes.QueueAttributeNameDeduplicationScope, sqstypes.QueueAttributeNameRedrivePolicy,
			},
		})
		if err != nil {
			var nf *sqstypes.QueueDoesNotExist
			if errors.As(err, &nf) {
				return set, config.Errorf("%s: queue %s does not exist", fs.Name("queue"), url)
			}
			if d := denied(err, "sqs:GetQueueAttributes", url); d != err {
				return set, d
			}
			return set, fmt.Errorf("cannot read attributes of queue %s: %w", url, err)
		}
		name := pool.QueueName(url)
		perGroup := out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)] == "messageGroup"
		if s.dedupScope != "" && (s.dedupScope == "group") != perGroup {
			return set, config.Errorf("%s %s contradicts queue %s, whose DeduplicationScope is %s: keys must be scoped as the queue deduplicates (leave %s unset to follow the queue)",
				fs.Name("dedup-scope"), s.dedupScope, name, orQueue(out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)]), fs.Name("dedup-scope"))
		}
		q := lambdaQueue{url: url, perGroup: perGroup, fifo: out.Attributes[string(sqstypes.QueueAttributeNameFifoQueue)] == "true"}
		if s.moveToDLQ {
			dlq, err := deadLetterURL(ctx, client, out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)])
			if err != nil {
				return set, config.Errorf("%s: queue %s: %v", fs.Name("move-to-dlq"), name, err)
			}
			q.dlq = dlq
		}
		set.byName[name] = q
		set.names = append(set.names, name)
		set.dlqs = append(set.dlqs, queueDLQ{name: name, fifo: q.fifo, perGroup: perGroup, redrive: out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]})
	}
	return set, nil
}

// moveToDLQ sends a record to its queue's dead-letter queue as it came:
// body, message attributes and, in a FIFO queue, its group; plus an
// idempotency-key attribute that keeps its dedup key, and a dedup id of its
// own (pool.DeadLetterCopy).
func moveToDLQ(ctx context.Context, client lambdaSQS, queues *queueResolver, rec events.SQSMessage) error {
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
	in, err := pool.DeadLetterCopy(q.dlq, q.fifo, m, aws.String(rec.Body), attrs)
	if err != nil {
		return err
	}
	_, err = client.SendMessage(ctx, in)
	return err
}

func orQueue(scope string) string {
	if scope == "" {
		return "queue (standard queue)"
	}
	return scope
}

// reportInitError tells the Runtime API why init failed; Lambda then reports
// it as the invocation's error. Best effort: the process exits non-zero anyway.
func reportInitError(ctx context.Context, api string, err error) {
	kind, errType := "Runtime.InitError", "InitError"
	var cerr *config.Error
	if errors.As(err, &cerr) {
		kind, errType = "Runtime.ConfigInvalid", "ConfigError"
	}
	body, _ := json.Marshal(map[string]any{"errorMessage": "worker: " + err.Error(), "errorType": errType, "stackTrace": []string{}})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if rerr != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", kind)
	// The Runtime API is local to the sandbox: never through a proxy.
	resp, rerr := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if rerr != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
