// Package memsqs is an in-memory Amazon SQS for fast, deterministic tests. It
// implements the SQS client methods the worker uses on the SDK's own input and
// output types, so code written against *sqs.Client cannot tell the two apart.
//
// It follows AWS, not the emulators: FIFO queues hand out nothing of a message
// group while one of its messages is in flight and return several messages of
// one group per receive, in order; deduplication lasts five minutes, per queue
// or per message group (DeduplicationScope); receipt handles go stale when a
// message is received again, and in FIFO queues when its visibility expires;
// redrive moves a message to the dead-letter queue on the receive after
// maxReceiveCount. Standard queues keep no order, no groups and no
// deduplication, take a delay per message and, with WithDuplicates, deliver
// a message twice now and then, as SQS may. The contract suite in
// sqscontract runs against it and against a real endpoint alike.
//
// A Server is safe for concurrent use. Long polls park on a notification
// channel and a timer for the next visibility or delay expiry; they never spin.
// Like SQS, it keeps serving a long poll whose caller cancelled it: messages
// that poll takes are in flight for nobody until their visibility timeout.
package memsqs

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/exactlyonce/exactly/internal/jitter"
)

// SQS limits and defaults.
const (
	dedupWindow      = 5 * time.Minute
	attemptWindow    = 5 * time.Minute
	maxVisibility    = 12 * time.Hour
	maxBatchEntries  = 10
	maxWaitSeconds   = 20
	maxBatchBytes    = 1 << 20
	maxAttributes    = 10
	maxAttrName      = 256
	maxMessageID     = 128
	maxDelaySeconds  = 900
	defaultMaxSize   = 1 << 20
	defaultRetention = 345600
	// seqBase makes sequence numbers 20 digits long, like AWS's.
	seqBase = 10_000_000_000_000_000_000
)

// Server is an in-memory SQS endpoint holding any number of queues.
type Server struct {
	clock   Clock
	region  string
	account string
	ids     *jitter.Rand              // message ids and receipt nonces; nil: crypto/rand
	dup     DuplicateFunc             // standard queues: SQS's own duplicate deliveries; nil: none
	woke    func(ctx context.Context) // a long poll woke (WithWake); nil: nothing

	mu     sync.Mutex
	queues map[string]*queue // by name
}

// Option configures a Server.
type Option func(*Server)

// WithClock makes the server follow c instead of the wall clock.
func WithClock(c Clock) Option { return func(s *Server) { s.clock = c } }

// WithRegion sets the region that appears in queue URLs and ARNs (us-east-1).
func WithRegion(r string) Option { return func(s *Server) { s.region = r } }

// WithIDs draws message ids and receipt handles from src instead of
// crypto/rand, so that a seeded test (the simulation) replays them.
func WithIDs(src rand.Source) Option { return func(s *Server) { s.ids = jitter.New(src) } }

// DuplicateFunc decides, at the receive-th receive of a message of the
// standard queue named queue, whether SQS leaves a second copy of it that
// comes back after delay (see WithDuplicates).
type DuplicateFunc func(queue, body string, receive int) (delay time.Duration, ok bool)

// WithDuplicates makes standard queues deliver a message twice now and
// then, as SQS documents it may (at-least-once delivery: a copy on a server
// that was unavailable when the message was received or deleted comes back
// later). At each receive of a message of a standard queue, dup says whether
// such a copy is left and when it becomes receivable: while the message is
// still in flight, or after it was deleted. The copy has the message's id,
// body and attributes and a receive count of its own; only its own receipt
// handles delete it (deleting the original leaves it), and it leaves no
// copy itself. FIFO queues never duplicate. Without this option a standard
// queue delivers each message once until it is deleted, which is what the
// contract suite can hold an emulator to.
func WithDuplicates(dup DuplicateFunc) Option { return func(s *Server) { s.dup = dup } }

// WithWake calls woke each time a long poll wakes (a message may have
// become receivable, its timer ran out, or its caller gave up), with the
// request's context, before the poll looks at its context and the queue
// again. A simulation orders there the polls that one send wakes together,
// which would otherwise race for the message, and lets a cancel that comes
// at the instant of a change land before the poll decides which it saw.
// A poll whose caller gave up goes on without a context, served at the
// queue's next operations, and wakes nothing after that.
func WithWake(woke func(ctx context.Context)) Option { return func(s *Server) { s.woke = woke } }

// New returns an empty server.
func New(opts ...Option) *Server {
	s := &Server{clock: RealClock{}, region: "us-east-1", account: "000000000000", queues: map[string]*queue{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

type queue struct {
	ids            *jitter.Rand // the server's
	name, url, arn string
	fifo           bool
	attrs          map[string]string // settable attributes, validated
	created        time.Time
	modified       time.Time

	vis          time.Duration
	delay        time.Duration
	wait         int32
	maxSize      int
	contentDedup bool
	scopeGroup   bool
	redrive      *redrivePolicy

	std    list.List         // standard queue: all messages, oldest first
	groups map[string]*group // FIFO: messages by group, in sequence order
	index  groupIndex        // FIFO: the groups in the order receive serves them
	byID   map[string]*message
	seq    uint64
	copies int // duplicate copies made (WithDuplicates)

	dedup      map[string]dedupEntry
	dedupOrder []dedupRef
	attempts   map[string]*attempt
	attemptLog []dedupRef

	changed chan struct{} // closed when messages may have become receivable
	deleted bool

	// abandoned are the long polls whose callers gave up, which SQS serves
	// to the end of their wait; servedTo is the instant they were served
	// to (serveAbandoned).
	abandoned []abandonedPoll
	servedTo  time.Time
}

// abandonedPoll is a long poll whose caller gave up before it answered.
type abandonedPoll struct {
	deadline time.Time
	maxN     int
	in       *sqs.ReceiveMessageInput
}

type redrivePolicy struct {
	dlqARN string
	max    int
}

type group struct {
	id   string
	msgs list.List

	// Its place in the queue's index (groupIndex.touch).
	head         string    // the head's sequence number
	receivableAt time.Time // when its head may be handed out
	in           *groupHeap
	idx          int
}

type dedupEntry struct {
	messageID, seq string
	at             time.Time
}

type dedupRef struct {
	key string
	at  time.Time
}

type attempt struct {
	at       time.Time
	messages []*message
	receives []int
	changes  []int
}

type message struct {
	id       string
	body     string
	attrs    map[string]types.MessageAttributeValue
	md5Body  string
	md5Attrs string
	group    string
	dedupID  string
	seq      string
	sent     time.Time
	copyN    int // a standard queue's duplicate copy (WithDuplicates): 1, 2, ...; 0 for the message itself

	delayUntil   time.Time
	receives     int
	firstReceive time.Time
	receivedAt   time.Time // of the current receipt
	handle       string    // the current receipt handle
	visibleAt    time.Time // in flight until then (when received)
	changes      int       // ChangeMessageVisibility calls that took effect

	elem *list.Element
	grp  *group
}

// ref is the message's key in its queue: its id, and for a duplicate copy
// the copy's number.
func (m *message) ref() string {
	if m.copyN == 0 {
		return m.id
	}
	return m.id + "/" + strconv.Itoa(m.copyN)
}

func (m *message) inFlight(now time.Time) bool { return m.receives > 0 && now.Before(m.visibleAt) }
func (m *message) delayed(now time.Time) bool  { return now.Before(m.delayUntil) }

// ---------------------------------------------------------------- errors

func opErr(op string, err error) error {
	return &smithy.OperationError{ServiceID: "SQS", OperationName: op, Err: err}
}

func invalidParam(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func missingParam(name string) error {
	return &smithy.GenericAPIError{Code: "MissingParameter", Message: "The request must contain the parameter " + name + ".", Fault: smithy.FaultClient}
}

func noQueue() error {
	return &types.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
}

func entryFail(id *string, code, msg string) types.BatchResultErrorEntry {
	return types.BatchResultErrorEntry{Id: id, Code: aws.String(code), Message: aws.String(msg), SenderFault: true}
}

// ---------------------------------------------------------------- queues

func (s *Server) queueURL(name string) string {
	return "http://sqs." + s.region + ".memsqs.local/" + s.account + "/" + name
}

// enter starts an operation on a queue: it fails if ctx is done, locks the
// server and finds the queue. On success the caller holds s.mu and unlocks it.
func (s *Server) enter(ctx context.Context, op string, url *string) (*queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, err)
	}
	s.mu.Lock()
	q, err := s.lookup(url)
	if err != nil {
		s.mu.Unlock()
		return nil, opErr(op, err)
	}
	return q, nil
}

func (s *Server) lookup(url *string) (*queue, error) {
	if url == nil || *url == "" {
		return nil, missingParam("QueueUrl")
	}
	u := *url
	name := u[strings.LastIndexByte(u, '/')+1:]
	q := s.queues[name]
	if q == nil || q.url != u {
		return nil, noQueue()
	}
	s.serveAbandoned(q, s.clock.Now())
	return q, nil
}

// serveAbandoned lets q's abandoned long polls take, up to now, what they
// would have taken had they gone on waiting, as SQS's do: each instant at
// which a message may have become receivable since they were last served
// (the last operation on q, or a timer's end: nextChange), in the order
// the polls were abandoned, each until it takes something or its wait
// ends. Between two operations on q only the clock changes it, so serving
// them at each operation (lookup, a waiting poll's wake) is exact, and no
// goroutine outlives the request: an idle stop leaves nothing running (a
// testing/synctest bubble ends clean).
func (s *Server) serveAbandoned(q *queue, now time.Time) {
	if len(q.abandoned) == 0 || q.servedTo.After(now) {
		q.servedTo = later(q.servedTo, now)
		return
	}
	t := q.servedTo
	for len(q.abandoned) > 0 {
		live := q.abandoned[:0]
		for _, a := range q.abandoned {
			if a.deadline.Before(t) {
				continue // its wait ended before t with nothing
			}
			if ms, err := s.receive(q, t, a.maxN, a.in); err == nil && len(ms) > 0 {
				continue // it answered, to nobody
			}
			if t.Before(a.deadline) {
				live = append(live, a)
			}
		}
		clear(q.abandoned[len(live):])
		q.abandoned = live
		if !t.Before(now) {
			break
		}
		next, ok := q.nextChange(t)
		if !ok || next.After(now) {
			next = now
		}
		t = next
	}
	q.servedTo = now
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *Server) byARN(arn string) *queue {
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	if q := s.queues[name]; q != nil && q.arn == arn {
		return q
	}
	return nil
}

var settable = map[string]bool{
	"VisibilityTimeout": true, "DelaySeconds": true, "MaximumMessageSize": true, "MessageRetentionPeriod": true,
	"ReceiveMessageWaitTimeSeconds": true, "RedrivePolicy": true, "RedriveAllowPolicy": true, "Policy": true,
	"KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true, "SqsManagedSseEnabled": true,
	"FifoQueue": true, "ContentBasedDeduplication": true, "DeduplicationScope": true, "FifoThroughputLimit": true,
}

var fifoOnly = map[string]bool{"ContentBasedDeduplication": true, "DeduplicationScope": true, "FifoThroughputLimit": true}

func invalidAttr(name, reason string) error {
	return &types.InvalidAttributeValue{Message: aws.String("Invalid value for the parameter " + name + ". Reason: " + reason)}
}

func intAttr(attrs map[string]string, name string, lo, hi int) (int, error) {
	v, err := strconv.Atoi(attrs[name])
	if err != nil || v < lo || v > hi {
		return 0, invalidAttr(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return v, nil
}

// apply validates attrs and sets the queue's derived settings from them.
func (s *Server) apply(q *queue, attrs map[string]string) error {
	for k, v := range attrs {
		if !settable[k] {
			return &types.InvalidAttributeName{Message: aws.String("Unknown Attribute " + k + ".")}
		}
		if fifoOnly[k] && !q.fifo {
			return invalidAttr(k, "the attribute applies only to FIFO queues")
		}
		switch k {
		case "ContentBasedDeduplication", "SqsManagedSseEnabled":
			if v != "true" && v != "false" {
				return invalidAttr(k, "must be true or false")
			}
		case "DeduplicationScope":
			if v != "queue" && v != "messageGroup" {
				return invalidAttr(k, "must be queue or messageGroup")
			}
		case "FifoThroughputLimit":
			if v != "perQueue" && v != "perMessageGroupId" {
				return invalidAttr(k, "must be perQueue or perMessageGroupId")
			}
		}
	}
	merged := make(map[string]string, len(q.attrs)+len(attrs))
	for k, v := range q.attrs {
		merged[k] = v
	}
	for k, v := range attrs {
		merged[k] = v
	}
	vis, err := intAttr(merged, "VisibilityTimeout", 0, 43200)
	if err != nil {
		return err
	}
	delay, err := intAttr(merged, "DelaySeconds", 0, 900)
	if err != nil {
		return err
	}
	wait, err := intAttr(merged, "ReceiveMessageWaitTimeSeconds", 0, maxWaitSeconds)
	if err != nil {
		return err
	}
	size, err := intAttr(merged, "MaximumMessageSize", 1024, 1<<20)
	if err != nil {
		return err
	}
	if _, err := intAttr(merged, "MessageRetentionPeriod", 60, 1209600); err != nil {
		return err
	}
	var rp *redrivePolicy
	if raw := merged["RedrivePolicy"]; raw != "" {
		if rp, err = s.parseRedrive(q, raw); err != nil {
			return err
		}
	} else {
		delete(merged, "RedrivePolicy")
	}
	q.attrs = merged
	q.vis = time.Duration(vis) * time.Second
	q.delay = time.Duration(delay) * time.Second
	q.wait = int32(wait)
	q.maxSize = size
	q.contentDedup = merged["ContentBasedDeduplication"] == "true"
	q.scopeGroup = merged["DeduplicationScope"] == "messageGroup"
	q.redrive = rp
	return nil
}

func (s *Server) parseRedrive(q *queue, raw string) (*redrivePolicy, error) {
	var p map[string]any
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, invalidAttr("RedrivePolicy", "it is not valid JSON")
	}
	arn, _ := p["deadLetterTargetArn"].(string)
	var maxN int
	switch v := p["maxReceiveCount"].(type) {
	case string:
		maxN, _ = strconv.Atoi(v)
	case float64:
		maxN = int(v)
	}
	if arn == "" || maxN < 1 || maxN > 1000 {
		return nil, invalidAttr("RedrivePolicy", "it needs deadLetterTargetArn and a maxReceiveCount from 1 to 1000")
	}
	dlq := s.byARN(arn)
	if dlq == nil {
		return nil, invalidAttr("RedrivePolicy", "Dead letter target does not exist.")
	}
	if dlq.fifo != q.fifo {
		return nil, invalidAttr("RedrivePolicy", "the dead-letter queue of a FIFO queue must be a FIFO queue, of a standard queue a standard queue")
	}
	return &redrivePolicy{dlqARN: arn, max: maxN}, nil
}

// CreateQueue creates a queue, or returns the URL of an existing one with the
// same attributes.
func (s *Server) CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	const op = "CreateQueue"
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, err)
	}
	name := aws.ToString(in.QueueName)
	fifoName := strings.HasSuffix(name, ".fifo")
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > 80 || strings.TrimLeft(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return nil, opErr(op, invalidParam("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"))
	}
	fifoAttr := in.Attributes["FifoQueue"] == "true"
	if fifoName != fifoAttr {
		return nil, opErr(op, invalidParam("The name of a FIFO queue must end with .fifo and the queue needs the attribute FifoQueue=true"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		for k, v := range in.Attributes {
			if q.attrs[k] != v {
				return nil, opErr(op, &types.QueueNameExists{Message: aws.String("A queue already exists with the same name and a different value for attribute " + k)})
			}
		}
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	}
	now := s.clock.Now()
	q := &queue{
		ids: s.ids, name: name, url: s.queueURL(name), arn: "arn:aws:sqs:" + s.region + ":" + s.account + ":" + name,
		fifo: fifoName, created: now, modified: now,
		attrs: map[string]string{
			"VisibilityTimeout": "30", "DelaySeconds": "0", "MaximumMessageSize": strconv.Itoa(defaultMaxSize),
			"MessageRetentionPeriod": strconv.Itoa(defaultRetention), "ReceiveMessageWaitTimeSeconds": "0",
			"SqsManagedSseEnabled": "true",
		},
		byID: map[string]*message{}, groups: map[string]*group{}, index: newGroupIndex(), dedup: map[string]dedupEntry{},
		attempts: map[string]*attempt{}, changed: make(chan struct{}),
	}
	if q.fifo {
		q.attrs["FifoQueue"] = "true"
		q.attrs["ContentBasedDeduplication"] = "false"
		q.attrs["DeduplicationScope"] = "queue"
		q.attrs["FifoThroughputLimit"] = "perQueue"
	}
	if err := s.apply(q, in.Attributes); err != nil {
		return nil, opErr(op, err)
	}
	s.queues[name] = q
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
}

// GetQueueUrl returns the URL of a queue by name.
func (s *Server) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	const op = "GetQueueUrl"
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[aws.ToString(in.QueueName)]
	if q == nil || (in.QueueOwnerAWSAccountId != nil && *in.QueueOwnerAWSAccountId != s.account) {
		return nil, opErr(op, noQueue())
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
}

// DeleteQueue deletes a queue and its messages; long polls on it end with
// QueueDoesNotExist.
func (s *Server) DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, _ ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	const op = "DeleteQueue"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	delete(s.queues, q.name)
	q.deleted, q.abandoned = true, nil
	q.notify()
	return &sqs.DeleteQueueOutput{}, nil
}

// GetQueueAttributes returns the requested attributes ("All" for all).
func (s *Server) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	const op = "GetQueueAttributes"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	all := map[string]string{}
	for k, v := range q.attrs {
		all[k] = v
	}
	now := s.clock.Now()
	visible, inflight, delayed := q.counts(now)
	all["QueueArn"] = q.arn
	all["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inflight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	all["CreatedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	all["LastModifiedTimestamp"] = strconv.FormatInt(q.modified.Unix(), 10)
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == types.QueueAttributeNameAll {
			out = all
			break
		}
		if v, ok := all[string(n)]; ok {
			out[string(n)] = v
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// SetQueueAttributes changes settable attributes.
func (s *Server) SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	const op = "SetQueueAttributes"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, ok := in.Attributes["FifoQueue"]; ok {
		return nil, opErr(op, invalidAttr("FifoQueue", "it cannot be changed"))
	}
	if err := s.apply(q, in.Attributes); err != nil {
		return nil, opErr(op, err)
	}
	q.modified = s.clock.Now()
	q.notify()
	return &sqs.SetQueueAttributesOutput{}, nil
}

func (q *queue) counts(now time.Time) (visible, inflight, delayed int) {
	for _, m := range q.byID {
		switch {
		case m.delayed(now):
			delayed++
		case m.inFlight(now):
			inflight++
		default:
			visible++
		}
	}
	return visible, inflight, delayed
}

// notify wakes the long polls of q.
func (q *queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// ---------------------------------------------------------------- send

func validBody(b string) bool {
	for _, r := range b {
		if r == utf8.RuneError ||
			!(r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)) {
			return false
		}
	}
	return true
}

// payloadSize is what SQS counts against MaximumMessageSize and a batch's
// total: the body and, for each attribute, its name, type and value.
func payloadSize(r sendReq) int {
	n := len(aws.ToString(r.body))
	for k, v := range r.attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

type sendReq struct {
	body     *string
	attrs    map[string]types.MessageAttributeValue
	group    *string
	dedupID  *string
	delaySec int32
}

func (q *queue) validate(r sendReq) (size int, err error) {
	if r.body == nil || *r.body == "" {
		return 0, missingParam("MessageBody")
	}
	if !validBody(*r.body) {
		return 0, &types.InvalidMessageContents{Message: aws.String("Invalid characters found.")}
	}
	if len(r.attrs) > maxAttributes {
		return 0, invalidParam("Number of message attributes [%d] exceeds the allowed maximum [10].", len(r.attrs))
	}
	for k, v := range r.attrs {
		dt := aws.ToString(v.DataType)
		base, _, _ := strings.Cut(dt, ".")
		switch {
		case k == "" || dt == "":
			return 0, invalidParam("The message attribute '%s' must have a name and a DataType.", k)
		case !validAttrName(k):
			return 0, invalidParam("The message attribute name '%s' is invalid: 1 to 256 of A-Z a-z 0-9 _ - ., no leading, trailing or successive periods, not starting with AWS. or Amazon.", k)
		case len(dt) > maxAttrName || !validAttrName(dt):
			return 0, invalidParam("The message attribute '%s' has an invalid type '%s'.", k, dt)
		case (base == "String" || base == "Number") && v.StringValue == nil:
			return 0, invalidParam("The message attribute '%s' with type '%s' must use field 'String'.", k, dt)
		case base == "Binary" && v.BinaryValue == nil:
			return 0, invalidParam("The message attribute '%s' with type 'Binary' must use field 'Binary'.", k)
		case base != "String" && base != "Number" && base != "Binary":
			return 0, invalidParam("The type of message attribute '%s' is invalid.", k)
		}
	}
	size = payloadSize(r)
	if size > q.maxSize {
		return 0, invalidParam("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.maxSize)
	}
	if r.delaySec < 0 || r.delaySec > maxDelaySeconds {
		return 0, invalidParam("Value %d for parameter DelaySeconds is invalid. Reason: must be from 0 to 900.", r.delaySec)
	}
	if r.group != nil && !validMessageID(*r.group) {
		return 0, invalidParam("Value %s for parameter MessageGroupId is invalid. Reason: 1 to 128 alphanumeric and punctuation characters.", *r.group)
	}
	if r.dedupID != nil && !validMessageID(*r.dedupID) {
		return 0, invalidParam("Value %s for parameter MessageDeduplicationId is invalid. Reason: 1 to 128 alphanumeric and punctuation characters.", *r.dedupID)
	}
	if q.fifo {
		switch {
		case aws.ToString(r.group) == "":
			return 0, missingParam("MessageGroupId")
		case r.delaySec != 0:
			return 0, invalidParam("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", r.delaySec)
		case aws.ToString(r.dedupID) == "" && !q.contentDedup:
			return 0, invalidParam("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
	} else if r.dedupID != nil {
		return 0, invalidParam("The request include parameter MessageDeduplicationId that is not valid for this queue type")
	}
	return size, nil
}

// validAttrName: a message attribute's name (and, past its base, its
// type): up to 256 of A-Z a-z 0-9 _ - ., no leading, trailing or
// successive periods, not AWS. or Amazon. in any case.
func validAttrName(k string) bool {
	low := strings.ToLower(k)
	if k == "" || len(k) > maxAttrName || k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") ||
		strings.HasPrefix(low, "aws.") || strings.HasPrefix(low, "amazon.") {
		return false
	}
	return strings.TrimLeft(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == ""
}

// validMessageID: a MessageGroupId or MessageDeduplicationId, 1 to 128
// alphanumeric and punctuation characters (printable ASCII but space).
func validMessageID(id string) bool {
	if id == "" || len(id) > maxMessageID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (q *queue) newID() string {
	var b [16]byte
	_ = q.ids.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// send enqueues a validated request; it returns the message (the original
// one for a deduplicated resend).
func (q *queue) send(now time.Time, r sendReq) *message {
	m := &message{
		body: *r.body, attrs: r.attrs, md5Body: md5Hex([]byte(*r.body)), md5Attrs: md5OfAttributes(r.attrs),
		group: aws.ToString(r.group), sent: now,
	}
	delay := q.delay
	if r.delaySec > 0 {
		delay = time.Duration(r.delaySec) * time.Second
	}
	if delay > 0 {
		m.delayUntil = now.Add(delay)
	}
	if q.fifo {
		m.dedupID = aws.ToString(r.dedupID)
		if m.dedupID == "" {
			sum := sha256.Sum256([]byte(m.body))
			m.dedupID = hex.EncodeToString(sum[:])
		}
		key := m.dedupID
		if q.scopeGroup {
			key = m.group + "\x00" + m.dedupID
		}
		q.expireDedup(now)
		if e, ok := q.dedup[key]; ok {
			return &message{id: e.messageID, seq: e.seq, md5Body: m.md5Body, md5Attrs: m.md5Attrs}
		}
		q.seq++
		m.seq = strconv.FormatUint(seqBase+q.seq, 10)
		m.id = q.newID()
		q.dedup[key] = dedupEntry{messageID: m.id, seq: m.seq, at: now}
		q.dedupOrder = append(q.dedupOrder, dedupRef{key: key, at: now})
	} else {
		m.id = q.newID()
	}
	q.enqueue(m)
	return m
}

func (q *queue) enqueue(m *message) {
	q.byID[m.ref()] = m
	if q.fifo {
		g := q.groups[m.group]
		if g == nil {
			g = &group{id: m.group}
			q.groups[m.group] = g
		}
		m.grp = g
		m.elem = g.msgs.PushBack(m)
		q.index.touch(g)
	} else {
		m.elem = q.std.PushBack(m)
	}
	q.notify()
}

func (q *queue) remove(m *message) {
	delete(q.byID, m.ref())
	if m.grp != nil {
		m.grp.msgs.Remove(m.elem)
		q.index.touch(m.grp)
		if m.grp.msgs.Len() == 0 {
			delete(q.groups, m.grp.id)
		}
	} else {
		q.std.Remove(m.elem)
	}
	m.elem, m.grp = nil, nil
}

func (q *queue) expireDedup(now time.Time) {
	n := 0
	for _, r := range q.dedupOrder {
		if now.Sub(r.at) < dedupWindow {
			break
		}
		if e, ok := q.dedup[r.key]; ok && e.at.Equal(r.at) {
			delete(q.dedup, r.key)
		}
		n++
	}
	q.dedupOrder = q.dedupOrder[n:]
}

// SendMessage sends one message.
func (s *Server) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	const op = "SendMessage"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := sendReq{body: in.MessageBody, attrs: copyAttrs(in.MessageAttributes), group: in.MessageGroupId, dedupID: in.MessageDeduplicationId, delaySec: in.DelaySeconds}
	if _, err := q.validate(r); err != nil {
		return nil, opErr(op, err)
	}
	m := q.send(s.clock.Now(), r)
	out := &sqs.SendMessageOutput{MessageId: aws.String(m.id), MD5OfMessageBody: aws.String(m.md5Body)}
	if m.md5Attrs != "" {
		out.MD5OfMessageAttributes = aws.String(m.md5Attrs)
	}
	if m.seq != "" {
		out.SequenceNumber = aws.String(m.seq)
	}
	return out, nil
}

func copyAttrs(a map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(a))
	for k, v := range a {
		c := types.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
		if v.BinaryValue != nil {
			c.BinaryValue = append([]byte(nil), v.BinaryValue...)
		}
		out[k] = c
	}
	return out
}

func checkEntryIDs(n int, id func(i int) *string) error {
	if n == 0 {
		return &types.EmptyBatchRequest{Message: aws.String("There should be at least one entry in the request.")}
	}
	if n > maxBatchEntries {
		return &types.TooManyEntriesInBatchRequest{Message: aws.String("Maximum number of entries per request are 10.")}
	}
	seen := make(map[string]bool, n)
	for i := range n {
		v := aws.ToString(id(i))
		if v == "" || len(v) > 80 || strings.TrimLeft(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return &types.InvalidBatchEntryId{Message: aws.String("A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")}
		}
		if seen[v] {
			return &types.BatchEntryIdsNotDistinct{Message: aws.String("Id " + v + " repeated.")}
		}
		seen[v] = true
	}
	return nil
}

func errCode(err error) (code, msg string) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage()
	}
	return "InternalError", err.Error()
}

// SendMessageBatch sends up to 10 messages; invalid entries fail one by one.
func (s *Server) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	const op = "SendMessageBatch"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := checkEntryIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
		return nil, opErr(op, err)
	}
	reqs := make([]sendReq, len(in.Entries))
	errs := make([]error, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		reqs[i] = sendReq{body: e.MessageBody, attrs: copyAttrs(e.MessageAttributes), group: e.MessageGroupId, dedupID: e.MessageDeduplicationId, delaySec: e.DelaySeconds}
		_, errs[i] = q.validate(reqs[i])
		total += payloadSize(reqs[i])
	}
	if total > maxBatchBytes {
		return nil, opErr(op, &types.BatchRequestTooLong{Message: aws.String("Batch requests cannot be longer than 1048576 bytes.")})
	}
	out := &sqs.SendMessageBatchOutput{}
	now := s.clock.Now()
	for i, e := range in.Entries {
		if errs[i] != nil {
			code, msg := errCode(errs[i])
			out.Failed = append(out.Failed, entryFail(e.Id, code, msg))
			continue
		}
		m := q.send(now, reqs[i])
		r := types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(m.id), MD5OfMessageBody: aws.String(m.md5Body)}
		if m.md5Attrs != "" {
			r.MD5OfMessageAttributes = aws.String(m.md5Attrs)
		}
		if m.seq != "" {
			r.SequenceNumber = aws.String(m.seq)
		}
		out.Successful = append(out.Successful, r)
	}
	return out, nil
}

// ---------------------------------------------------------------- receive

// ReceiveMessage receives up to MaxNumberOfMessages messages, long-polling
// for up to WaitTimeSeconds (the queue's ReceiveMessageWaitTimeSeconds when
// 0) or until ctx is done.
func (s *Server) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	const op = "ReceiveMessage"
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, err)
	}
	maxN := in.MaxNumberOfMessages
	if maxN == 0 {
		maxN = 1
	}
	switch {
	case maxN < 1 || maxN > maxBatchEntries:
		return nil, opErr(op, invalidParam("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN))
	case in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > maxWaitSeconds:
		return nil, opErr(op, invalidParam("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", in.WaitTimeSeconds))
	case in.VisibilityTimeout < 0 || in.VisibilityTimeout > 43200:
		return nil, opErr(op, invalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be from 0 to 43200.", in.VisibilityTimeout))
	}
	s.mu.Lock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		s.mu.Unlock()
		return nil, opErr(op, err)
	}
	wait := in.WaitTimeSeconds
	if wait == 0 {
		wait = q.wait
	}
	deadline := s.clock.Now().Add(time.Duration(wait) * time.Second)
	s.mu.Unlock()
	ms, err := s.poll(ctx, q, deadline, int(maxN), in)
	if err != nil {
		return nil, opErr(op, err)
	}
	return &sqs.ReceiveMessageOutput{Messages: ms}, nil
}

// poll receives from q until it gets messages or deadline passes. When ctx
// ends first, the caller gets its error at once but the poll goes on, as it
// does on SQS: messages it takes then stay in flight for nobody until their
// visibility timeout (aws/aws-sdk-go-v2#2068). It goes on as an abandoned
// poll of q (serveAbandoned), not a goroutine.
func (s *Server) poll(ctx context.Context, q *queue, deadline time.Time, maxN int, in *sqs.ReceiveMessageInput) ([]types.Message, error) {
	s.mu.Lock()
	for {
		now := s.clock.Now()
		if q.deleted {
			s.mu.Unlock()
			return nil, noQueue()
		}
		ms, err := s.receive(q, now, maxN, in)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if len(ms) > 0 || !now.Before(deadline) {
			s.mu.Unlock()
			return ms, nil
		}
		changed := q.changed
		until := deadline
		if t, ok := q.nextChange(now); ok && t.Before(until) {
			until = t
		}
		s.mu.Unlock()
		timer, stop := s.clock.NewTimer(until.Sub(now))
		select {
		case <-changed:
		case <-timer:
		case <-ctx.Done():
		}
		stop()
		if s.woke != nil {
			s.woke(ctx) // before ctx is looked at: WithWake
		}
		if ctx.Err() != nil { // also when it ended as the poll woke: select picks at random
			s.mu.Lock()
			if !q.deleted {
				s.serveAbandoned(q, s.clock.Now())
				q.abandoned = append(q.abandoned, abandonedPoll{deadline: deadline, maxN: maxN, in: in})
			}
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
		s.serveAbandoned(q, s.clock.Now())
	}
}

// nextChange is the earliest time after now at which a message may become
// receivable without anyone acting: a visibility timeout or a delay ends.
func (q *queue) nextChange(now time.Time) (time.Time, bool) {
	if q.fifo {
		return q.index.nextChange(now)
	}
	var next time.Time
	for e := q.std.Front(); e != nil; e = e.Next() {
		m := e.Value.(*message)
		for _, t := range []time.Time{m.delayUntil, m.visibleAt} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next, !next.IsZero()
}

func (s *Server) receive(q *queue, now time.Time, maxN int, in *sqs.ReceiveMessageInput) ([]types.Message, error) {
	vis := q.vis
	if in.VisibilityTimeout > 0 {
		vis = time.Duration(in.VisibilityTimeout) * time.Second
	}
	attemptID := aws.ToString(in.ReceiveRequestAttemptId)
	if q.fifo && attemptID != "" {
		q.expireAttempts(now)
		if a := q.attempts[attemptID]; a != nil {
			if a.modified(q) {
				// AWS: retryable only while none of its messages was
				// deleted or had its visibility changed.
				delete(q.attempts, attemptID)
				return nil, invalidParam("Value %s for parameter ReceiveRequestAttemptId is invalid. Reason: The receiveRequestAttemptId is not valid anymore since the receive call is not retryable.", attemptID)
			}
			if a.stillHeld(now) {
				// A retried receive: the same messages and receipt handles,
				// with the visibility timeout reset.
				out := make([]types.Message, len(a.messages))
				for i, m := range a.messages {
					m.visibleAt = now.Add(vis)
					q.index.touch(m.grp)
					out[i] = s.view(q, m, in)
				}
				return out, nil
			}
		}
	}
	var got []*message
	take := func(m *message) bool {
		if rp := q.redrive; rp != nil && m.receives >= rp.max {
			if dlq := s.byARN(rp.dlqARN); dlq != nil {
				q.remove(m)
				if dlq != q {
					s.serveAbandoned(dlq, now) // up to the instant the message arrives
				}
				s.deadLetter(dlq, m)
				return false
			}
		}
		m.receives++
		if m.receives == 1 {
			m.firstReceive = now
		}
		m.receivedAt = now
		m.visibleAt = now.Add(vis)
		m.handle = q.receipt(m)
		if !q.fifo && s.dup != nil && m.copyN == 0 {
			if d, ok := s.dup(q.name, m.body, m.receives); ok {
				q.copies++
				c := &message{id: m.id, body: m.body, attrs: m.attrs, md5Body: m.md5Body, md5Attrs: m.md5Attrs,
					sent: m.sent, copyN: q.copies, delayUntil: now.Add(max(d, time.Millisecond))}
				q.enqueue(c) // at the back, delayed: not taken by this receive
			}
		}
		got = append(got, m)
		return true
	}
	if q.fifo {
		// Oldest available group first, as many of its messages as fit.
		q.index.promote(now)
		var served []*group
		for len(got) < maxN {
			g := q.index.next()
			if g == nil {
				break
			}
			served = append(served, g)
			for e := g.msgs.Front(); e != nil && len(got) < maxN; {
				m := e.Value.(*message)
				e = e.Next()
				if m.delayed(now) {
					break
				}
				take(m)
			}
		}
		for _, g := range served {
			q.index.touch(g) // now blocked, emptied or delayed: waiting
		}
	} else {
		for e := q.std.Front(); e != nil && len(got) < maxN; {
			m := e.Value.(*message)
			e = e.Next()
			if m.delayed(now) || m.inFlight(now) {
				continue
			}
			take(m)
		}
	}
	if q.fifo && attemptID != "" && len(got) > 0 {
		a := &attempt{at: now, messages: got, receives: make([]int, len(got)), changes: make([]int, len(got))}
		for i, m := range got {
			a.receives[i] = m.receives
			a.changes[i] = m.changes
		}
		q.attempts[attemptID] = a
		q.attemptLog = append(q.attemptLog, dedupRef{key: attemptID, at: now})
	}
	out := make([]types.Message, len(got))
	for i, m := range got {
		out[i] = s.view(q, m, in)
	}
	return out, nil
}

// modified reports whether one of the attempt's messages was deleted or
// had its visibility changed since.
func (a *attempt) modified(q *queue) bool {
	for i, m := range a.messages {
		if q.byID[m.ref()] != m || m.changes != a.changes[i] {
			return true
		}
	}
	return false
}

// stillHeld reports whether the attempt's receipts are all current: none
// of its messages was received again, nor became visible.
func (a *attempt) stillHeld(now time.Time) bool {
	for i, m := range a.messages {
		if m.receives != a.receives[i] || !m.inFlight(now) {
			return false
		}
	}
	return true
}

func (q *queue) expireAttempts(now time.Time) {
	n := 0
	for _, r := range q.attemptLog {
		if now.Sub(r.at) < attemptWindow {
			break
		}
		if a, ok := q.attempts[r.key]; ok && a.at.Equal(r.at) {
			delete(q.attempts, r.key)
		}
		n++
	}
	q.attemptLog = q.attemptLog[n:]
}

// deadLetter moves m into dlq as redrive does: same message id, body,
// attributes, group and deduplication id; its receive count is kept.
func (s *Server) deadLetter(dlq *queue, m *message) {
	c := *m
	c.elem, c.grp = nil, nil
	c.visibleAt, c.receivedAt, c.delayUntil, c.handle = time.Time{}, time.Time{}, time.Time{}, ""
	if dlq.fifo {
		dlq.seq++
		c.seq = strconv.FormatUint(seqBase+dlq.seq, 10)
	}
	dlq.enqueue(&c)
}

// view renders m as a received message with the requested attributes.
func (s *Server) view(q *queue, m *message, in *sqs.ReceiveMessageInput) types.Message {
	out := types.Message{
		MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.handle),
		Body: aws.String(m.body), MD5OfBody: aws.String(m.md5Body),
	}
	sys := map[string]bool{}
	for _, n := range in.MessageSystemAttributeNames {
		sys[string(n)] = true
	}
	//lint:ignore SA1019 the deprecated spelling still works on SQS, so the fake takes it too
	for _, n := range in.AttributeNames { //nolint:staticcheck // SQS still takes the deprecated field, so the fake reads it
		sys[string(n)] = true
	}
	if len(sys) > 0 {
		all := map[string]string{
			"SenderId":                         "AIDAMEMSQS" + s.account,
			"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
			"ApproximateReceiveCount":          strconv.Itoa(m.receives),
			"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		}
		if m.group != "" {
			all["MessageGroupId"] = m.group
		}
		if m.dedupID != "" {
			all["MessageDeduplicationId"] = m.dedupID
		}
		if m.seq != "" {
			all["SequenceNumber"] = m.seq
		}
		out.Attributes = map[string]string{}
		for k, v := range all {
			if sys["All"] || sys[k] {
				out.Attributes[k] = v
			}
		}
	}
	if attrs := filterAttrs(m.attrs, in.MessageAttributeNames); len(attrs) > 0 {
		out.MessageAttributes = attrs
		out.MD5OfMessageAttributes = aws.String(md5OfAttributes(attrs))
	}
	return out
}

func filterAttrs(attrs map[string]types.MessageAttributeValue, names []string) map[string]types.MessageAttributeValue {
	if len(attrs) == 0 || len(names) == 0 {
		return nil
	}
	out := map[string]types.MessageAttributeValue{}
	for k, v := range attrs {
		for _, n := range names {
			if n == "All" || n == ".*" || n == k || (strings.HasSuffix(n, ".*") && strings.HasPrefix(k, n[:len(n)-1])) {
				out[k] = copyAttrs(map[string]types.MessageAttributeValue{k: v})[k]
				break
			}
		}
	}
	return out
}

// seqLess orders sequence numbers (decimal strings).
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// ---------------------------------------------------------------- receipts

var receiptEnc = base64.RawURLEncoding

// receipt encodes which receive of which message a handle belongs to.
// A duplicate copy's handles carry its number after the receive count.
func (q *queue) receipt(m *message) string {
	queue := q.name
	var nonce [6]byte
	_ = q.ids.Read(nonce[:])
	n := strconv.Itoa(m.receives)
	if m.copyN > 0 {
		n += "/" + strconv.Itoa(m.copyN)
	}
	return receiptEnc.EncodeToString([]byte("memsqs1\x00" + queue + "\x00" + m.id + "\x00" + n + "\x00" + hex.EncodeToString(nonce[:])))
}

type handleState int

const (
	handleInvalid  handleState = iota // not a receipt handle of this queue
	handleGone                        // the message was deleted or moved
	handleStale                       // the message was received again since
	handleExpired                     // its visibility timeout has passed
	handleInFlight                    // current
)

func (q *queue) resolve(h *string, now time.Time) (*message, handleState) {
	raw, err := receiptEnc.DecodeString(aws.ToString(h))
	if err != nil {
		return nil, handleInvalid
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 5 || parts[0] != "memsqs1" || parts[1] != q.name {
		return nil, handleInvalid
	}
	count, copyN, isCopy := strings.Cut(parts[3], "/")
	n, err := strconv.Atoi(count)
	if err != nil {
		return nil, handleInvalid
	}
	ref := parts[2]
	if isCopy {
		ref += "/" + copyN
	}
	m := q.byID[ref]
	switch {
	case m == nil:
		return nil, handleGone
	case m.receives != n:
		return m, handleStale
	case !m.inFlight(now):
		return m, handleExpired
	}
	return m, handleInFlight
}

// deleteOne deletes by receipt handle as SQS does: unknown handles are
// invalid; a handle of a message already gone succeeds; a stale handle
// succeeds without deleting in a standard queue; in a FIFO queue a handle
// whose visibility timeout has passed has expired.
func (q *queue) deleteOne(h *string, now time.Time) error {
	if aws.ToString(h) == "" {
		return missingParam("ReceiptHandle")
	}
	m, st := q.resolve(h, now)
	switch st {
	case handleInvalid:
		return &types.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + aws.ToString(h) + "\" is not a valid receipt handle.")}
	case handleGone:
		return nil
	case handleStale, handleExpired:
		if q.fifo {
			return &types.ReceiptHandleIsInvalid{Message: aws.String("The receipt handle has expired.")}
		}
		if st == handleStale {
			return nil
		}
	}
	q.remove(m)
	if q.fifo {
		q.notify() // the group may be unblocked
	}
	return nil
}

func (q *queue) changeOne(h *string, secs int32, now time.Time) error {
	if aws.ToString(h) == "" {
		return missingParam("ReceiptHandle")
	}
	if secs < 0 || secs > 43200 {
		return invalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be from 0 to 43200.", secs)
	}
	m, st := q.resolve(h, now)
	switch st {
	case handleInvalid:
		return &types.ReceiptHandleIsInvalid{Message: aws.String("The input receipt handle \"" + aws.ToString(h) + "\" is not a valid receipt handle.")}
	case handleGone, handleStale, handleExpired:
		return &types.MessageNotInflight{Message: aws.String("The message referred to is not in flight.")}
	}
	until := now.Add(time.Duration(secs) * time.Second)
	if until.Sub(m.receivedAt) > maxVisibility {
		return invalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", secs)
	}
	m.visibleAt = until
	m.changes++
	if m.grp != nil {
		q.index.touch(m.grp)
	}
	if secs == 0 {
		q.notify()
	}
	return nil
}

// DeleteMessage deletes one message by receipt handle.
func (s *Server) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	const op = "DeleteMessage"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := q.deleteOne(in.ReceiptHandle, s.clock.Now()); err != nil {
		return nil, opErr(op, err)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// DeleteMessageBatch deletes up to 10 messages; entries fail one by one.
func (s *Server) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	const op = "DeleteMessageBatch"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := checkEntryIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
		return nil, opErr(op, err)
	}
	out := &sqs.DeleteMessageBatchOutput{}
	now := s.clock.Now()
	for _, e := range in.Entries {
		if err := q.deleteOne(e.ReceiptHandle, now); err != nil {
			code, msg := errCode(err)
			out.Failed = append(out.Failed, entryFail(e.Id, code, msg))
			continue
		}
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// ChangeMessageVisibility changes the visibility timeout of one in-flight message.
func (s *Server) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	const op = "ChangeMessageVisibility"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := q.changeOne(in.ReceiptHandle, in.VisibilityTimeout, s.clock.Now()); err != nil {
		return nil, opErr(op, err)
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch changes up to 10 visibility timeouts; entries
// fail one by one.
func (s *Server) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	const op = "ChangeMessageVisibilityBatch"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := checkEntryIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
		return nil, opErr(op, err)
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	now := s.clock.Now()
	for _, e := range in.Entries {
		if err := q.changeOne(e.ReceiptHandle, e.VisibilityTimeout, now); err != nil {
			code, msg := errCode(err)
			out.Failed = append(out.Failed, entryFail(e.Id, code, msg))
			continue
		}
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

// PurgeQueue deletes all messages of a queue.
func (s *Server) PurgeQueue(ctx context.Context, in *sqs.PurgeQueueInput, _ ...func(*sqs.Options)) (*sqs.PurgeQueueOutput, error) {
	const op = "PurgeQueue"
	q, err := s.enter(ctx, op, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	q.std.Init()
	q.groups = map[string]*group{}
	q.index = newGroupIndex()
	q.byID = map[string]*message{}
	return &sqs.PurgeQueueOutput{}, nil
}
