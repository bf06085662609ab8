// Package memsns is an in-memory Amazon SNS for fast, deterministic tests. It
// implements the SNS client methods a fan-out path uses (topics,
// subscriptions of SQS queues, Publish and PublishBatch) on the SDK's own
// input and output types, and delivers each publication to every subscribed
// queue through an SQS client (an in-memory SQS, internal/memsqs, or a real
// one) the way SNS does:
//
//   - raw message delivery off: the queue's message body is SNS's JSON
//     envelope (Envelope), with the published message attributes inside it
//     and none on the SQS message;
//   - raw message delivery on: the body is the published message and its
//     attributes are the SQS message's attributes; a publication with more
//     than 10 attributes is discarded for that subscription, as SNS
//     discards it (a client-side error);
//   - a FIFO topic passes the message group and the deduplication id (the
//     publisher's, or the SHA-256 of the message with content-based
//     deduplication) to a FIFO queue, so that SQS deduplicates the same
//     publication delivered twice;
//   - a filter policy on message attributes (FilterPolicyScope
//     MessageAttributes) holds back what it does not match: exact strings
//     and numbers, {"prefix": ...}, {"anything-but": ...} of strings and
//     {"exists": ...}; other operators and the MessageBody scope are
//     refused at Subscribe, naming what memsns does not implement.
//
// It enforces SNS's documented limits (Limits in docs/DESIGN.md): a message
// of 1 byte to the topic's MaximumMessageSize (262,144 bytes by default, up
// to 1 MiB) counting its attributes' names, types and values; a batch of 1
// to 10 entries with distinct ids of up to 80 characters, whose messages
// together fit MaximumMessageSize; a subject of up to 100 characters; on a
// FIFO topic a MessageGroupId, and a MessageDeduplicationId unless the topic
// has content-based deduplication, each 1 to 128 printable characters; and
// a five-minute deduplication window per topic, within which a publication
// with a known deduplication id is accepted (with the first one's message id
// and sequence number) and delivered to nobody. A standard topic takes no
// FIFO queue as a subscriber.
//
// Delivery is synchronous: when Publish returns, every matching
// subscription's SendMessage has returned. A delivery that fails (a deleted
// queue, a fault injected in the SQS client) is counted in Undelivered and
// not retried; SNS retries an SQS endpoint for days, so a test that needs
// that must make its SQS client fail no sends.
//
// A Server is safe for concurrent use.
package memsns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/jitter"
)

// SNS limits and defaults.
const (
	// DedupWindow is how long a FIFO topic remembers a deduplication id.
	DedupWindow = 5 * time.Minute
	// DefaultMaxMessageSize is a topic's MaximumMessageSize unless set:
	// one message, or a batch's messages together, with their attributes.
	DefaultMaxMessageSize = 262144
	// MaxMessageSizeLimit is the largest MaximumMessageSize a topic takes.
	MaxMessageSizeLimit = 1 << 20
	// MaxBatchEntries is PublishBatch's limit.
	MaxBatchEntries = 10
	// MaxRawAttributes is how many message attributes a raw delivery to an
	// SQS queue carries; a publication with more is discarded for it.
	MaxRawAttributes = 10

	maxBatchEntryID = 80
	maxSubject      = 100
	maxTopicName    = 256
	// seqBase makes sequence numbers 20 digits long, like AWS's.
	seqBase = 10_000_000_000_000_000_000
)

// SQS is what the server needs of an SQS endpoint to deliver to a queue:
// its URL from the name in the subscription's queue ARN, and SendMessage.
// *sqs.Client and *memsqs.Server satisfy it.
type SQS interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Clock is the time source of a Server: the deduplication window and the
// envelope's Timestamp follow it. memsqs.Clock (RealClock, ManualClock)
// satisfies it.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Server is an in-memory SNS endpoint holding any number of topics.
type Server struct {
	sqs     SQS
	clock   Clock
	region  string
	account string
	ids     *jitter.Rand

	mu     sync.Mutex
	topics map[string]*topic        // by ARN
	subs   map[string]*subscription // by ARN
	failed int                      // deliveries whose SendMessage failed
}

// Option configures a Server.
type Option func(*Server)

// WithClock makes the server follow c instead of the wall clock.
func WithClock(c Clock) Option { return func(s *Server) { s.clock = c } }

// WithRegion sets the region of topic ARNs (us-east-1). Queue ARNs name
// their own.
func WithRegion(r string) Option { return func(s *Server) { s.region = r } }

// WithIDs draws message and subscription ids from src instead of
// crypto/rand, so that a seeded test (the simulation) replays them.
func WithIDs(src rand.Source) Option { return func(s *Server) { s.ids = jitter.New(src) } }

// New returns a server without topics that delivers through q.
func New(q SQS, opts ...Option) *Server {
	s := &Server{sqs: q, clock: realClock{}, region: "us-east-1", account: "000000000000",
		topics: map[string]*topic{}, subs: map[string]*subscription{}}
	for _, o := range opts {
		o(s)
	}
	if s.ids == nil {
		s.ids = jitter.New(nil)
	}
	return s
}

// Undelivered is how many deliveries to a queue failed (their SendMessage
// returned an error) since the server started.
func (s *Server) Undelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

type topic struct {
	arn, name    string
	fifo         bool
	contentDedup bool
	maxSize      int
	attrs        map[string]string // other settable attributes, as given
	subs         []*subscription   // in subscription order
	seq          uint64
	dedup        map[string]dedupEntry
}

type dedupEntry struct {
	messageID, seq string
	at             time.Time
}

type subscription struct {
	arn      string
	topic    *topic
	queueARN string
	raw      bool
	filter   *filterPolicy
	queueURL string            // resolved at the first delivery; "" again after a failed one
	attrs    map[string]string // as set, for GetSubscriptionAttributes
}

// ---------------------------------------------------------------- ids

func (s *Server) newID() string {
	var b [16]byte
	_ = s.ids.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func validTopicName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > maxTopicName {
		return false
	}
	return strings.TrimLeft(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}

func validBatchEntryID(id string) bool {
	return id != "" && len(id) <= maxBatchEntryID &&
		strings.TrimLeft(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}

func contentHash(msg string) string {
	h := sha256.Sum256([]byte(msg))
	return hex.EncodeToString(h[:])
}

func (t *topic) nextSeq() string {
	t.seq++
	return strconv.FormatUint(seqBase+t.seq, 10)
}

func (t *topic) expireDedup(now time.Time) {
	for k, e := range t.dedup {
		if now.Sub(e.at) >= DedupWindow {
			delete(t.dedup, k)
		}
	}
}

func boolAttr(name, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, invalidParam("Attribute %s: must be true or false, not %q", name, v)
}

func intAttr(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidParam("Attribute %s: must be an integer from %d to %d, not %q", name, lo, hi, v)
	}
	return n, nil
}
