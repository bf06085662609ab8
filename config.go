package exactly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/idempotency"
	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/sqsevent"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// SQS is the part of the SQS client the worker and the Lambda handler call.
// *sqs.Client satisfies it.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DynamoDB is the part of the DynamoDB client the ledger calls, as in
// package idempotency. *dynamodb.Client satisfies it.
type DynamoDB = idempotency.DynamoDB

var (
	_ SQS      = (*sqs.Client)(nil)
	_ DynamoDB = (*dynamodb.Client)(nil)
)

// Defaults of Config.
const (
	DefaultNamespace    = "exactly"
	DefaultTTL          = 24 * time.Hour
	DefaultKeySource    = "auto"
	DefaultPayloadHash  = "body"
	DefaultRetryInPlace = 2
	DefaultConcurrency  = 32
	DefaultReceivers    = 2
	DefaultWaitTime     = 20 * time.Second
	DefaultAckDelay     = 50 * time.Millisecond
	// DefaultShutdownTimeout fits inside ECS's stopTimeout of 120 s.
	DefaultShutdownTimeout = 90 * time.Second
	// DefaultLambdaConcurrency bounds the groups of one batch run at once.
	DefaultLambdaConcurrency = 10
)

// Config configures a Worker (New) and a Lambda handler (NewLambdaHandler).
// The zero value of every optional field means its documented default.
type Config struct {
	// SQS and DynamoDB are the clients (sqs.NewFromConfig,
	// dynamodb.NewFromConfig). Retries are the SDK's.
	SQS      SQS
	DynamoDB DynamoDB
	// AWS, when set, makes the clients that SQS and DynamoDB leave nil.
	AWS *aws.Config
	// Queues are the URLs of the queues to consume: required by a Worker.
	// A Lambda handler reads a listed queue's attributes at start and any
	// other event source queue the first time one of its events arrives.
	Queues []string
	// Subscriptions declares the queues subscribed to an SNS topic: their
	// messages are unwrapped before anything else sees them (the effect
	// gets the published body and attributes and the envelope's facts in
	// effect.Message.Notification; the dedup key and the payload hash are
	// taken from the published message). With raw message delivery off a
	// body that is not SNS's envelope is a permanent failure, to the DLQ.
	// A Worker's must name queues of Queues.
	Subscriptions []Subscription
	// Table is the dedup table (partition key pk, TTL on expires_at);
	// required. `worker setup` and the dedup-table Terraform module make it.
	Table string
	// Effect is what runs once per logical message; required. An
	// effect.Func adapts a plain func.
	Effect effect.Effect

	// Commit says how the effect and its dedup record commit: CommitClaim,
	// CommitTransactional, CommitOptimistic or CommitCarried. Empty: CommitOptimistic for
	// an effect.WritesOnly, CommitClaim for any other.
	Commit CommitMode
	// GroupCommit, in optimistic mode, gathers the commits ready within
	// this window (at most 100 items) into one TransactWriteItems: fewer
	// DynamoDB requests and, where requests are the bottleneck, more
	// messages per second. The transaction goes as soon as every message
	// under way in the worker has joined it (one alone goes at once); the
	// window bounds the wait for a straggler. A
	// duplicate, a conflict or a failed condition cancels the shared
	// transaction; its other commits are retried alone at once. DynamoDB
	// bills write units, not requests: on AWS it saves no money. At most
	// 1 second. Defaults to 0: each commit alone.
	//
	// In a Worker, a message whose commit waits in a shared transaction
	// gives its handler's slot back: another group's message runs its
	// effect meanwhile, and the message takes a slot again after its
	// answer, before its group's next message (a group stays strictly in
	// order: its next message starts only once this commit has its
	// answer). So Concurrency bounds the effects running at once, not the
	// commits waiting for their answer, which are bounded by the groups the
	// worker runs at once: at most 2×Concurrency + 10 per receiver. A
	// shared transaction waits only for the effects that began before its
	// first commit joined, not for those started meanwhile. The Lambda
	// handler keeps its slot to the end.
	GroupCommit time.Duration

	// Outbox takes the messages effects return in Output.Send
	// (outbox.New(dynamodbClient, table)): they commit in the same
	// transaction as the message's COMPLETED record, and `worker relay`
	// publishes them. Nil: an effect that returns Send fails permanently.
	Outbox *outbox.Outbox

	// KeySource says where a message's dedup key comes from: auto (the
	// idempotency-key attribute, else the MessageDeduplicationId, else the
	// MessageId), attr:NAME, json:/pointer or body. Defaults to "auto".
	// KeyFunc, when set, wins.
	KeySource string
	// KeyFunc computes a message's dedup key in Go. An error, or an empty
	// key, is a permanent failure of that message.
	KeyFunc func(effect.Message) (string, error)
	// PayloadHash says what of a message tells a duplicate from a conflict:
	// body, json:/a,/b (those values, canonicalised) or none. Defaults to
	// "body" (the body byte for byte).
	PayloadHash string
	// Namespace is the first part of every dedup key; workers that must
	// deduplicate together share it. Defaults to "exactly".
	Namespace string
	// TTL is how long a completed message suppresses its duplicates, at
	// least a minute. Defaults to 24 hours.
	TTL time.Duration

	// Lease is the dedup lease of a claim, at least 2 seconds, extended by
	// heartbeats. Defaults to the queue's visibility timeout less a
	// tenth (at least 1 second), so that a dead worker's lease has ended
	// when SQS redelivers its message. Worker only.
	Lease time.Duration
	// Visibility overrides the queues' visibility timeouts for receives and
	// heartbeats, up to 12 hours. Defaults to each queue's own
	// VisibilityTimeout. Worker only.
	Visibility time.Duration
	// Concurrency bounds the handlers running at once (groups in
	// parallel). Defaults to 32 for a Worker and to 10 for a Lambda
	// handler. With GroupCommit, a Worker's Concurrency bounds the effects
	// running at once, not the commits waiting for their answer: see
	// GroupCommit.
	Concurrency int
	// Receivers is the number of concurrent long polls per queue. Defaults
	// to one per 8 of Concurrency, at least 2: with Concurrency at its
	// default, defaults to 4. A receive brings at most 10 messages per
	// SQS round trip (10-20 ms), about what 8 handlers finish meanwhile;
	// fewer receivers cap the rate whatever the concurrency. With
	// GroupCommit, one per 4 of Concurrency (8 at the default): a handler
	// that gives its slot back while its commit waits finishes about twice
	// as many. Worker only.
	Receivers int
	// MaxInFlight bounds the messages received and not yet finished; no
	// receive is made above it. Defaults to 10 × (Concurrency + the
	// receivers of every queue) (360 for one queue with the other
	// defaults): a FIFO receive brings up to 10 messages of one group,
	// which run one after another, so that many keep every handler on a
	// group of its own. Whatever it is, a receive is made only while the
	// lanes with work (FIFO groups, or a standard queue's messages) and 10
	// for each open receive number at most 2×Concurrency + 10 per
	// receiver: a standard queue's worker holds no more than that. Lower
	// it for large messages (up to 256 KiB each are held in memory).
	// Worker only.
	MaxInFlight int
	// WaitTime is the long-poll wait, whole seconds from 1 s to 20 s, cut
	// to half a queue's visibility timeout (a delivery's visibility is
	// counted from when its receive was made); it also bounds how long a
	// graceful stop waits for open polls. Defaults to 20 seconds. Worker
	// only.
	WaitTime time.Duration
	// AckDelay is the longest a delete or visibility change waits to fill
	// a batch of 10, from 1 ms to 5 s, counted from when its message
	// finished; when the worker holds no other message of the queue they go
	// at once. A FIFO group's next message waits up to this long for its
	// predecessor's delete. Defaults to 50 milliseconds. Worker only.
	AckDelay time.Duration
	// RetryInPlace is how many times a retryable failure is retried in
	// place (after about 1 s, then 2 s, ..., or the effect's RetryAfter up
	// to 5 minutes) before the message goes back to SQS, at most 20;
	// negative: none. Defaults to 2. The rest of its FIFO group waits
	// meanwhile, and no receive count rises. On Lambda a retry goes only
	// while the invocation's time left, less Lambda.LeaseMargin, covers the
	// wait and Lambda.MinLease (the function is billed for the wait).
	RetryInPlace int
	// ShutdownTimeout is how long running handlers may finish once Run's
	// context is cancelled (or Stop is called). Defaults to 90 seconds,
	// inside ECS's stopTimeout of 120 s. Worker only.
	ShutdownTimeout time.Duration
	// LeaveToRedrivePolicy leaves permanent failures to the queues' redrive
	// policies (maxReceiveCount) instead of moving them to the dead-letter
	// queue at once. A poison message that waits for its redrive policy
	// holds its FIFO group back meanwhile. When it is false, a Lambda
	// handler's listed queues must have a dead-letter queue.
	LeaveToRedrivePolicy bool

	// Lambda holds the settings only a Lambda handler has.
	Lambda LambdaConfig

	// Hooks are called as messages are handled, by a Worker and by a
	// Lambda handler.
	Hooks Hooks

	// Logger receives the worker's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, traces each message: a span
	// "process <queue>" (a child of the producer's span, from its
	// traceparent message attribute or SQS's AWSTraceHeader) with spans for
	// its claim, effect and commit; the effect's context carries it, and the
	// http effect sends traceparent downstream. Nil: no tracing.
	TracerProvider trace.TracerProvider

	// EMF, when its Writer is set, also writes the metrics as CloudWatch
	// Embedded Metric Format lines, which CloudWatch Logs turns into
	// metrics with no agent: a Worker every EMF.Interval and when it has
	// drained, a Lambda handler after each batch.
	EMF EMF

	// Registerer, when set, gets the worker's Prometheus collectors
	// (exactly_*). Nothing is registered if nil. A Lambda handler counts
	// into them too (for a registry the function reads itself); its
	// metrics reach CloudWatch through Config.EMF.
	Registerer prometheus.Registerer

	// Test is for tests: the ledger's clock and the source of randomness
	// (see TestConfig). Leave it zero in a deployment.
	Test TestConfig
}

// Subscription declares a queue subscribed to an SNS topic
// (Config.Subscriptions).
type Subscription struct {
	// Queue is the subscribed queue's URL (matched by its name, so that a
	// Lambda handler's event source queue matches too).
	Queue string
	// Topic is the topic's ARN (arn:aws:sns:<region>:<account>:<name>): a
	// message from another topic is a permanent failure.
	Topic string
	// Raw is the subscription's RawMessageDelivery: on, the body is the
	// published message and its attributes are the SQS message's; off
	// (false), the body is SNS's JSON envelope.
	Raw bool
}

// EMF configures the CloudWatch Embedded Metric Format lines (Config.EMF):
// per queue (dimension Queue, the queue's name) and period, the counts
// Received, Applied, Duplicates, Conflicts, Busy, Retries,
// PermanentFailures and LeasesLost, and samples of EffectLatency and
// CommitLatency (milliseconds) and MessageAge (seconds, when a message is
// done); a Worker adds InFlight (the messages it holds), in a line without
// dimensions. A queue with nothing to report writes nothing.
type EMF struct {
	Writer    io.Writer     // where the lines go (os.Stdout on Lambda and ECS's awslogs); nil: off
	Namespace string        // CloudWatch namespace; defaults to "exactly"
	Interval  time.Duration // a Worker's period, at least 1 s; defaults to 1 minute
}

// Defaults of Config.EMF.
const (
	DefaultEMFNamespace = "exactly"
	DefaultEMFInterval  = time.Minute
)

// CommitMode says how an effect and its dedup record commit (Config.Commit).
// Every mode keeps the promise for a WritesOnly effect: its writes are
// applied once, whatever fails. They differ in cost and in what else they
// allow.
type CommitMode string

const (
	// CommitClaim claims the key first (a conditional put whose lease the
	// worker keeps alive while the effect runs), runs the effect, then marks
	// the record COMPLETED: two DynamoDB writes per message. For any effect:
	// one with outside side effects passes the key downstream as its
	// idempotency key, and may see it twice only when a worker dies or
	// stalls between its effect and the commit. An effect's Writes, when it
	// returns any, commit in one transaction with the record.
	CommitClaim CommitMode = "claim"
	// CommitTransactional is CommitClaim for an effect.WritesOnly: claim
	// first, then its writes and the COMPLETED record in one
	// TransactWriteItems, fenced by the claim's token. The effect runs only
	// for a key it holds, at the price of a second write.
	CommitTransactional CommitMode = "transactional"
	// CommitOptimistic skips the claim, for an effect.WritesOnly: the effect
	// computes its writes and one TransactWriteItems puts the COMPLETED
	// record (on the claim's condition) together with them: one DynamoDB
	// request per message. A duplicate's writes are computed and dropped;
	// a duplicate, a conflict or another worker's live claim is read from
	// the cancelled transaction. An effect that fails is tried again under
	// a claim before its failure is judged.
	CommitOptimistic CommitMode = "optimistic"
	// CommitCarried is CommitOptimistic with no record item, for an
	// effect.CarriesRecord: the record's attributes ride on the effect's
	// own per-message item (its first write, a Put conditioned on the
	// item's absence), so exactly-once costs no write unit of its own. The
	// dedup window is that item's lifetime; duplicates are found only by
	// workers in this mode on the same effect (the dedup table holds no
	// record of these messages: inspect, forget and the console do not
	// see them); an effect that fails is judged at once, without a claim.
	// No group commit. docs/DESIGN.md states it in full.
	CommitCarried CommitMode = "carried"
)

// LambdaConfig holds the settings of a Lambda handler.
type LambdaConfig struct {
	// FailRest says what a failed message in a FIFO queue takes with it
	// into batchItemFailures: "group" (default: the later messages of its
	// group; other groups go on) or "batch" (every later message; the batch
	// then runs one message at a time, in order).
	FailRest string
	// DedupScope, "queue" or "group", is the key scope of a queue whose
	// attributes cannot be read; a listed queue that contradicts it is a
	// configuration error. Empty: follow each queue.
	DedupScope string
	// LeaseMargin is left between a lease's end and the invocation's
	// deadline, for the commit. Defaults to 2 seconds.
	LeaseMargin time.Duration
	// MinLease: with less lease than this left before the margin, a message
	// is not started. Defaults to 1 second.
	MinLease time.Duration
}

// ConfigError is a configuration problem found before anything runs: a
// setting out of range, a queue or table that does not exist or does not
// fit, a permission the role lacks. Fix what it names and start again.
type ConfigError struct {
	// Setting is the Config field at fault ("Queues", "Lambda.FailRest"),
	// or empty when the environment is (credentials, permissions).
	Setting string
	// Msg follows the setting's name: " must be at least 1", `: queue ...`.
	Msg string
	// Err is the cause, when the problem came as an error (a parse error,
	// a denied call): errors.Is and errors.As see it through the
	// ConfigError.
	Err error
}

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

func (e *ConfigError) Error() string {
	if e.Setting == "" {
		return "exactly: " + strings.TrimLeft(e.Msg, ": ")
	}
	return "exactly: Config." + e.Setting + e.Msg
}

// configErr formats a ConfigError; an error formatted with %w is its cause.
func configErr(setting, format string, args ...any) error {
	w := fmt.Errorf(format, args...)
	return &ConfigError{Setting: setting, Msg: w.Error(), Err: errors.Unwrap(w)}
}

// settings are a Config with its defaults filled in and its strings parsed.
type settings struct {
	Config
	keys    dedup.KeySource
	payload dedup.PayloadSource
	log     *slog.Logger
	rand    *jitter.Rand // Test.Rand's, or nil: the runtime's
}

// commitMode checks Config.Commit against the effect and resolves the
// default. Without an effect (Validate) it checks the value only.
func (cfg Config) commitMode() (CommitMode, error) {
	_, writesOnly := cfg.Effect.(effect.WritesOnly)
	switch cfg.Commit {
	case "":
		if writesOnly {
			return CommitOptimistic, nil
		}
		return CommitClaim, nil
	case CommitClaim:
		return cfg.Commit, nil
	case CommitTransactional, CommitOptimistic:
		if cfg.Effect == nil || writesOnly {
			return cfg.Commit, nil
		}
		return "", configErr("Commit", " %s needs an effect whose whole effect is the DynamoDB writes it returns (one that implements effect.WritesOnly, as effect.WritesFunc does); %T does not say so: use claim", cfg.Commit, cfg.Effect)
	case CommitCarried:
		if _, carries := cfg.Effect.(effect.CarriesRecord); cfg.Effect == nil || carries {
			return cfg.Commit, nil
		}
		return "", configErr("Commit", " carried needs an effect whose first write carries the dedup record (one that implements effect.CarriesRecord, as the ledger effect does); %T does not: use optimistic", cfg.Effect)
	}
	return "", configErr("Commit", " %q: want claim, transactional, optimistic or carried (empty: optimistic for an effect.WritesOnly, claim otherwise)", string(cfg.Commit))
}

// Validate checks the settings of a Worker without calling AWS: every
// value in range, every string parsed. It does not check the clients, the
// effect, or what only AWS can tell (queues, table, permissions): New does.
// Every error is a *ConfigError.
func (cfg Config) Validate() error {
	_, err := cfg.settings(false)
	return err
}

// ValidateLambda is Validate for a Lambda handler's settings.
func (cfg Config) ValidateLambda() error {
	_, err := cfg.settings(true)
	return err
}

// check validates cfg for a Worker (lambda false) or a Lambda handler,
// clients and effect included, and fills the defaults in.
func check(cfg Config, lambda bool) (*settings, error) {
	if cfg.AWS != nil && cfg.SQS == nil {
		cfg.SQS = sqs.NewFromConfig(*cfg.AWS)
	}
	if cfg.AWS != nil && cfg.DynamoDB == nil {
		cfg.DynamoDB = dynamodb.NewFromConfig(*cfg.AWS)
	}
	switch {
	case cfg.SQS == nil:
		return nil, configErr("SQS", " is nil: pass sqs.NewFromConfig(cfg), or set Config.AWS")
	case cfg.DynamoDB == nil:
		return nil, configErr("DynamoDB", " is nil: pass dynamodb.NewFromConfig(cfg), or set Config.AWS")
	case cfg.Effect == nil:
		return nil, configErr("Effect", " is nil: pass the effect to run once per message (effect.Func adapts a func)")
	}
	return cfg.settings(lambda)
}

// settings validates the values and fills the defaults in.
func (cfg Config) settings(lambda bool) (*settings, error) {
	s := &settings{Config: cfg}
	switch {
	case cfg.Table == "":
		return nil, configErr("Table", " is empty: name the dedup table (`worker setup --table` or the dedup-table Terraform module creates it)")
	case !lambda && len(cfg.Queues) == 0:
		return nil, configErr("Queues", " is required: give the URL of at least one SQS queue")
	}
	for _, q := range cfg.Queues {
		if !strings.HasPrefix(q, "http://") && !strings.HasPrefix(q, "https://") {
			return nil, configErr("Queues", " %q is not a queue URL: want https://sqs.<region>.amazonaws.com/<account>/<name>", q)
		}
	}
	if err := cfg.checkSubscriptions(lambda); err != nil {
		return nil, err
	}
	if s.KeySource == "" {
		s.KeySource = DefaultKeySource
	}
	var err error
	if s.keys, err = dedup.ParseKeySource(s.KeySource); err != nil {
		return nil, configErr("KeySource", ": %w", err)
	}
	if cfg.KeyFunc != nil {
		s.keys = dedup.KeyFunc(cfg.KeyFunc)
	}
	if s.PayloadHash == "" {
		s.PayloadHash = DefaultPayloadHash
	}
	if s.payload, err = dedup.ParsePayloadSource(s.PayloadHash); err != nil {
		return nil, configErr("PayloadHash", ": %w", err)
	}
	if s.Commit, err = cfg.commitMode(); err != nil {
		return nil, err
	}
	if s.EMF.Interval < 0 || (s.EMF.Interval > 0 && s.EMF.Interval < time.Second) {
		return nil, configErr("EMF.Interval", " %s: want 0 (%s) or at least 1s", s.EMF.Interval, DefaultEMFInterval)
	}
	if s.EMF.Interval == 0 {
		s.EMF.Interval = DefaultEMFInterval
	}
	switch {
	case s.GroupCommit < 0 || s.GroupCommit > time.Second:
		return nil, configErr("GroupCommit", " %s: want 0 (off) up to 1s; a few milliseconds is the point", s.GroupCommit)
	case s.GroupCommit > 0 && s.Commit != CommitOptimistic && (cfg.Effect != nil || cfg.Commit != ""):
		// With no effect and no mode named, the mode is the effect's default,
		// not known yet: New checks it once the effect is there.
		return nil, configErr("GroupCommit", " is for optimistic mode, and Config.Commit is %s: set it to 0, or commit optimistically", s.Commit)
	}
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	if strings.ContainsAny(s.Namespace, "#%") {
		return nil, configErr("Namespace", " %q: want a name without '#' or '%%'", s.Namespace)
	}
	if s.TTL == 0 {
		s.TTL = DefaultTTL
	}
	if s.TTL < time.Minute {
		return nil, configErr("TTL", " %s is too short: want at least 1m (SQS alone deduplicates for 5m; hours or days is the point)", s.TTL)
	}
	if s.Concurrency < 0 {
		return nil, configErr("Concurrency", " must be at least 1")
	}
	s.rand = jitter.New(cfg.Test.Rand)
	s.log = cfg.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	if lambda {
		return s, s.checkLambda()
	}
	return s, s.checkWorker()
}

// checkSubscriptions holds Config.Subscriptions to what SNS can deliver.
func (cfg Config) checkSubscriptions(lambda bool) error {
	seen := map[string]bool{}
	for i, sub := range cfg.Subscriptions {
		setting := fmt.Sprintf("Subscriptions[%d]", i)
		name := sqsmsg.QueueName(sub.Queue)
		p := strings.Split(sub.Topic, ":")
		switch {
		case !strings.HasPrefix(sub.Queue, "http://") && !strings.HasPrefix(sub.Queue, "https://"):
			return configErr(setting+".Queue", " %q is not a queue URL: want https://sqs.<region>.amazonaws.com/<account>/<name>", sub.Queue)
		case !lambda && !slices.Contains(cfg.Queues, sub.Queue):
			return configErr(setting+".Queue", " %q is not one of Queues: list it there too", sub.Queue)
		case seen[name]:
			return configErr(setting+".Queue", " %q is declared twice: one subscription per queue", sub.Queue)
		case len(p) != 6 || p[0] != "arn" || p[2] != "sns" || p[5] == "":
			return configErr(setting+".Topic", " %q is not an SNS topic ARN: want arn:aws:sns:<region>:<account>:<topic>", sub.Topic)
		case sqsmsg.IsFIFO(name) && !sqsmsg.IsFIFO(p[5]):
			return configErr(setting+".Topic", " %q is a standard topic, and SNS delivers none to the FIFO queue %s: subscribe it to a FIFO topic", sub.Topic, name)
		}
		seen[name] = true
	}
	return nil
}

// unwrap is the Processor's Unwrap for Config.Subscriptions; nil without any.
func (s *settings) unwrap() func(effect.Message) (effect.Message, bool, error) {
	if len(s.Subscriptions) == 0 {
		return nil
	}
	subs := make(map[string]sqsmsg.Subscription, len(s.Subscriptions))
	for _, sub := range s.Subscriptions {
		subs[sqsmsg.QueueName(sub.Queue)] = sqsmsg.Subscription{Topic: sub.Topic, Raw: sub.Raw}
	}
	return func(m effect.Message) (effect.Message, bool, error) {
		sub, ok := subs[m.QueueName]
		if !ok {
			return m, false, nil
		}
		u, err := sqsmsg.Unwrap(m, sub)
		return u, true, err
	}
}

func (s *settings) checkWorker() error {
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.Receivers == 0 {
		s.Receivers = pool.ReceiversFor(s.Concurrency, s.GroupCommit > 0)
	}
	switch {
	case s.Receivers < 0:
		return configErr("Receivers", " must be at least 1")
	case s.MaxInFlight < 0:
		return configErr("MaxInFlight", " must not be negative")
	}
	if err := s.checkRetryInPlace(); err != nil {
		return err
	}
	if s.WaitTime == 0 {
		s.WaitTime = DefaultWaitTime
	}
	if s.WaitTime < time.Second || s.WaitTime > 20*time.Second || s.WaitTime%time.Second != 0 {
		return configErr("WaitTime", " must be whole seconds from 1s to 20s (SQS's long-poll range)")
	}
	if s.AckDelay == 0 {
		s.AckDelay = DefaultAckDelay
	}
	if s.AckDelay < time.Millisecond || s.AckDelay > 5*time.Second {
		return configErr("AckDelay", " must be between 1ms and 5s")
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.ShutdownTimeout < 0 {
		return configErr("ShutdownTimeout", " must be positive")
	}
	if s.Lease < 0 || (s.Lease > 0 && s.Lease < 2*time.Second) {
		return configErr("Lease", " must be 0 (the queue's visibility timeout) or at least 2s")
	}
	if s.Visibility < 0 || s.Visibility > 12*time.Hour {
		return configErr("Visibility", " must be between 0 and 12h")
	}
	return nil
}

// checkRetryInPlace checks RetryInPlace and sets its default (worker and
// Lambda).
func (s *settings) checkRetryInPlace() error {
	switch {
	case s.RetryInPlace > 20:
		return configErr("RetryInPlace", " must be at most 20")
	case s.RetryInPlace == 0:
		s.RetryInPlace = DefaultRetryInPlace
	case s.RetryInPlace < 0:
		s.RetryInPlace = 0
	}
	return nil
}

func (s *settings) checkLambda() error {
	if s.Concurrency == 0 {
		s.Concurrency = DefaultLambdaConcurrency
	}
	if err := s.checkRetryInPlace(); err != nil {
		return err
	}
	if _, err := sqsevent.ParseFailRest(s.Lambda.FailRest); err != nil {
		return configErr("Lambda.FailRest", " %w", err)
	}
	switch s.Lambda.DedupScope {
	case "", "queue", "group":
	default:
		return configErr("Lambda.DedupScope", " %q: want queue (one key per queue, the queue's DeduplicationScope=queue) or group (per message group, DeduplicationScope=messageGroup)", s.Lambda.DedupScope)
	}
	if s.Lambda.LeaseMargin < 0 || s.Lambda.MinLease < 0 {
		return configErr("Lambda.LeaseMargin", " and Lambda.MinLease must not be negative")
	}
	return nil
}

// denied turns a credential or permission error from a start-up call into a
// ConfigError naming the action and resource; other errors pass.
func denied(err error, action, resource string) error {
	if msg, ok := awserr.Denied(err, action, resource); ok {
		return &ConfigError{Msg: msg, Err: err}
	}
	return err
}
