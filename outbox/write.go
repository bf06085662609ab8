package outbox

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/ddblimit"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/internal/outboxschema"
)

// API is the part of the DynamoDB client the outbox and its relay use;
// *dynamodb.Client implements it.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Message is one message to publish.
type Message struct {
	// QueueURL is the destination queue; or give TopicARN. Exactly one
	// of the two.
	QueueURL string
	// TopicARN is the destination SNS topic (arn:<partition>:sns:<region>:
	// <account>:<name>), which delivers each message to every queue
	// subscribed to it: the relay publishes with PublishBatch, under the
	// same rules as for a queue (a FIFO topic, named .fifo, needs a Group
	// and gets the same MessageDeduplicationId and idempotency-key).
	TopicARN string
	// Group is the MessageGroupId, required for a FIFO queue or topic.
	// Messages of one (destination, group) are published in the order
	// their transactions committed. On a standard queue it only orders the relay's
	// publication (SQS does not keep it) and may be empty.
	Group string
	// Body is the message body: 1 byte to 256 KiB with Attributes, of the
	// characters SQS accepts.
	Body string
	// Attributes are String message attributes: at most 9 (the relay adds
	// idempotency-key), names as SQS allows them.
	Attributes map[string]string
	// ID identifies the message within its group for good: the relay
	// sends Key(Group, ID) as the MessageDeduplicationId (FIFO) and as the
	// idempotency-key attribute, so every copy is one message to SQS and
	// to an exactly worker, and the same ID in two groups is two messages.
	// Up to 128 printable ASCII characters. Empty means a random one; give
	// one derived from your business key when a Write may be retried
	// after an unknown outcome, so that a second Write of the same message
	// is a duplicate downstream rather than a second message.
	ID string
}

// Key is the key the relay publishes a message of group with id under: its
// MessageDeduplicationId and idempotency-key. SQS deduplicates a FIFO
// queue's messages per queue by default (DeduplicationScope=queue), and an
// exactly worker scopes its keys as the queue does, so a key of the id
// alone would make the same id in two groups one message: the second
// dropped by SQS within five minutes, or taken by the worker for a
// duplicate. A key names one (group, id): the id alone without a group
// when it holds no '/' and is not shaped like a hashed key; group/id when
// that fits SQS's 128 characters and the group holds no '/' (so it reads
// back unambiguously, and never as an id of no group, which holds no
// '/'); else "h" and 63 hex digits of SHA-256 over group, a NUL and id
// (SQS allows no NUL in either, so the pair hashed is unambiguous; the
// key never holds a '/'). The relay publishes the key stored with the
// message when it was written (a message written before a change of this
// encoding keeps the key it had).
func Key(group, id string) string {
	if group == "" && !strings.Contains(id, "/") && !hashShaped(id) {
		return id
	}
	if k := group + "/" + id; group != "" && len(k) <= maxIDLen && !strings.Contains(group, "/") {
		return k
	}
	sum := sha256.Sum256([]byte(group + "\x00" + id))
	return "h" + hex.EncodeToString(sum[:])[:63]
}

// hashShaped reports whether s looks like a key Key hashed: "h" and 63
// lowercase hex digits.
func hashShaped(s string) bool {
	if len(s) != 64 || s[0] != 'h' {
		return false
	}
	for _, c := range s[1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Limits of a message, SQS's, and SNS's alike: a publication of at most
// 256 KiB of body and attributes, and at most 10 attributes where SNS
// delivers to an SQS queue (the idempotency-key among them).
const (
	MaxBodyBytes  = 256 * 1024
	MaxAttributes = 9
	maxIDLen      = 128
)

// ErrInvalid wraps what Write refuses, nothing written, and no retry can
// change: a message SQS would never take, or a transaction DynamoDB would
// refuse (over 100 items, an item over 400 KB, over 4 MB), found before
// sending anything, or refused by DynamoDB (its ValidationException: it
// counts a transaction's size beyond what can be counted before).
var ErrInvalid = errors.New("outbox: invalid")

// Outbox writes messages to an outbox table in the transactions that make
// the changes they announce. Safe for concurrent use.
type Outbox struct {
	db    API
	table string
	now   func() time.Time
	rand  *jitter.Rand // WithRand's, or nil: the runtime's

	combine bool // Write combines concurrent Writes of one group (WithoutCombining)
	mu      sync.Mutex
	lines   map[string]*line // by partition key: the groups with a combined Write under way
}

// Option configures an Outbox or a Relay.
type Option func(*options)

type options struct {
	now       func() time.Time
	rand      *jitter.Rand
	noCombine bool
}

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithRand draws the jitter of Write's retries from src (tests: a seeded
// source replays a run); the default is math/rand/v2's global source.
func WithRand(src rand.Source) Option { return func(o *options) { o.rand = jitter.New(src) } }

// WithoutCombining makes each Write its own transaction, as before
// combining existed: concurrent Writes of one group then conflict on its
// head and retry (see Write).
func WithoutCombining() Option { return func(o *options) { o.noCombine = true } }

// New returns an Outbox writing to table.
func New(db API, table string, opts ...Option) *Outbox {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return &Outbox{db: db, table: table, now: o.now, rand: o.rand, combine: !o.noCombine, lines: map[string]*line{}}
}

// Table is the outbox table's name.
func (o *Outbox) Table() string { return o.table }

// maxWriteAttempts bounds Write's retries when another producer of the
// same group committed first, or a transaction conflicted.
const maxWriteAttempts = 50

// Write commits writes (the caller's own, on any tables) and msgs in one
// TransactWriteItems: all or nothing. The messages of a group get the next
// sequence numbers of that group: a transaction of another producer that
// commits first moves them, and Write reads the group again and retries
// (at most 50 attempts, a few seconds with backoff, within ctx); the
// caller's writes are sent again unchanged. Every failed attempt means
// another transaction on the group committed.
//
// Concurrent Writes of this Outbox whose messages are all of one (queue,
// group) are combined (unless WithoutCombining): while a transaction of
// the group is under way, later Writes wait, then go together in the next
// one, each Write's writes and then its messages in the order the Writes
// came (a Write's messages stay consecutive), the head advanced once, up
// to DynamoDB's 100 actions and 4 MB a transaction (the rest go in the
// next). Each Write is still all or nothing and gets the result it would
// have had alone: the others of a transaction cancelled by one Write's
// condition go again without it; a transaction DynamoDB refuses as
// invalid is sent again one Write at a time; Writes naming the same item
// (an update's, delete's or check's key, or a put's item holding it) are
// not put together. A Write of several groups always goes alone.
//
// An error that wraps a *types.TransactionCanceledException whose reason
// for one of writes is ConditionalCheckFailed is the caller's condition:
// nothing was written. Its CancellationReasons are those of the caller's
// own items: its writes first, then the outbox's, as in a transaction of
// its own.
// With any other error the outcome may be unknown (the request may have
// committed and lost its response; for a combined transaction, every one
// of its Writes gets that error): retrying Write is safe for the messages
// when their ID is stable. When ctx ends while the Write waits for its
// group, it returns ctx.Err() with nothing written; while its transaction
// is under way, the outcome is unknown, and that transaction is not
// cancelled while another of its Writes waits for it (the Write whose
// goroutine sent it returns when the request ends).
func (o *Outbox) Write(ctx context.Context, msgs []Message, writes ...types.TransactWriteItem) error {
	if len(msgs) == 0 {
		return fmt.Errorf("%w: no messages", ErrInvalid)
	}
	if o.combine {
		if g, err := oneGroup(msgs); err != nil || g != nil {
			if err != nil {
				return err
			}
			return o.writeCombined(ctx, g, writes)
		}
	}
	return o.writeAlone(ctx, msgs, writes)
}

// writeAlone is Write in a transaction of its own.
func (o *Outbox) writeAlone(ctx context.Context, msgs []Message, writes []types.TransactWriteItem) error {
	var last error
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, backoff(o.rand, attempt)); err != nil {
				return err
			}
		}
		b, err := o.Prepare(ctx, msgs)
		if err != nil {
			return err
		}
		items := slices.Concat(writes, b.Items)
		if err := checkSize(items, len(writes)); err != nil {
			return err
		}
		_, err = o.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		if awserr.Code(err) == "ValidationException" {
			// Past a limit by DynamoDB's own count (it counts more than
			// checkSize can), or otherwise malformed: the same request
			// is refused again.
			return fmt.Errorf("%w: DynamoDB refused the transaction: %w", ErrInvalid, err)
		}
		if !b.Retry(err, len(writes)) {
			return fmt.Errorf("outbox: write: %w", err)
		}
		last = err
	}
	return fmt.Errorf("outbox: write: %d attempts, the groups kept moving: %w", maxWriteAttempts, last)
}

// checkSize refuses a transaction of the caller's n writes and the outbox
// items after them that DynamoDB would refuse, by what can be counted
// before the request (ddblimit.Check).
func checkSize(items []types.TransactWriteItem, n int) error {
	switch over, i, size := ddblimit.Check(items); over {
	case ddblimit.Actions:
		return fmt.Errorf("%w: %d writes and %d outbox items: a transaction holds at most %d", ErrInvalid, n, len(items)-n, ddblimit.TransactItems)
	case ddblimit.Item:
		what := fmt.Sprintf("write %d puts an item", i)
		if i >= n {
			what = fmt.Sprintf("outbox item %d is", i-n)
		}
		return fmt.Errorf("%w: %s of %d bytes: a DynamoDB item takes at most 400 KB (%d bytes), attribute names included", ErrInvalid, what, size, ddblimit.ItemBytes)
	case ddblimit.Bytes:
		return fmt.Errorf("%w: %d writes and %d outbox items of at least %d bytes: a transaction takes at most 4 MB (%d bytes)", ErrInvalid, n, len(items)-n, size, ddblimit.TransactBytes)
	}
	return nil
}

// Batch is the outbox's part of a transaction: per group, an update of its
// head conditioned on the sequence number read, and a put per message.
// Prepare makes one; a caller that builds its own transaction appends
// Items to it.
type Batch struct {
	// Items are the transaction items, heads first.
	Items []types.TransactWriteItem
}

// Retry reports whether a failed TransactWriteItems holding b's items at
// offset (after the caller's own) failed only because a group's head moved
// or the transaction conflicted: prepare again and retry. False for any
// other cancellation reason (a caller's condition) and any other error.
func (b Batch) Retry(err error, offset int) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	moved := false
	for i, r := range tce.CancellationReasons {
		switch code := aws.ToString(r.Code); {
		case code == "" || code == "None":
		case code == "TransactionConflict":
			moved = true
		case code == "ConditionalCheckFailed" && i >= offset && i < offset+len(b.Items):
			// A head moved, or a message's place was taken by the
			// transaction that moved it.
			moved = true
		default:
			return false
		}
	}
	return moved
}

// Prepare reads the heads of msgs' groups (strongly consistent) and returns
// the items that append msgs to them. They commit only while no other
// transaction has appended to those groups since: see Batch.Retry.
func (o *Outbox) Prepare(ctx context.Context, msgs []Message) (Batch, error) {
	groups, err := groupsOf(msgs)
	if err != nil {
		return Batch{}, err
	}
	now := o.now()
	var b Batch
	var puts []types.TransactWriteItem
	for _, g := range groups {
		h, err := o.readHead(ctx, g.pk)
		if err != nil {
			return Batch{}, err
		}
		b.Items = append(b.Items, o.headUpdate(g.pk, g.queue, g.name, h, int64(len(g.msgs)), now))
		puts = o.appendPuts(puts, g.pk, g.name, h.seq, g.msgs, now)
	}
	b.Items = append(b.Items, puts...)
	return b, nil
}

// msgGroup is one (queue, group) of a Write's messages, in order.
type msgGroup struct {
	pk, queue, name string
	msgs            []Message
}

// groupsOf validates msgs and gathers them by (queue, group), in the order
// each group first appears.
func groupsOf(msgs []Message) ([]*msgGroup, error) {
	var groups []*msgGroup
	byPK := map[string]*msgGroup{}
	for i, m := range msgs {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrInvalid, i, err)
		}
		pk := partitionKey(m.destination(), m.Group)
		g := byPK[pk]
		if g == nil {
			g = &msgGroup{pk: pk, queue: m.destination(), name: m.Group}
			byPK[pk] = g
			groups = append(groups, g)
		}
		g.msgs = append(g.msgs, m)
	}
	return groups, nil
}

// groupHead is what a Write needs of a group's head: its sequence number,
// and whether the item exists.
type groupHead struct {
	seq    int64
	exists bool
}

func (o *Outbox) readHead(ctx context.Context, pk string) (groupHead, error) {
	out, err := o.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &o.table, Key: headKey(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return groupHead{}, fmt.Errorf("outbox: read group %q: %w", pk, err)
	}
	return groupHead{seq: getN(out.Item, outboxschema.AttrSeq), exists: out.Item != nil}, nil
}

// headUpdate advances the head of group pk by n from h, on the condition
// that it is still h.
func (o *Outbox) headUpdate(pk, queue, group string, h groupHead, n int64, now time.Time) types.TransactWriteItem {
	names := map[string]string{"#seq": outboxschema.AttrSeq, "#q": outboxschema.AttrQueue, "#g": outboxschema.AttrGroup, "#shard": outboxschema.AttrShard, "#since": outboxschema.AttrSince}
	values := map[string]types.AttributeValue{
		":new": num(h.seq + n), ":q": str(queue), ":g": str(group),
		":shard": str(shardOf(pk)), ":now": num(now.UnixMilli()),
	}
	cond := "#seq = :old"
	if !h.exists {
		cond = "attribute_not_exists(#pk)"
		names["#pk"] = outboxschema.AttrPK
	} else {
		values[":old"] = num(h.seq)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 &o.table,
		Key:                       headKey(pk),
		UpdateExpression:          aws.String("SET #seq = :new, #q = :q, #g = :g, #shard = if_not_exists(#shard, :shard), #since = if_not_exists(#since, :now)"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}
}

// appendPuts appends to puts the items of msgs, numbered from after seq.
func (o *Outbox) appendPuts(puts []types.TransactWriteItem, pk, group string, seq int64, msgs []Message, now time.Time) []types.TransactWriteItem {
	for i, m := range msgs {
		id := m.ID
		if id == "" {
			id = newID()
		}
		it := map[string]types.AttributeValue{
			outboxschema.AttrPK: str(pk), outboxschema.AttrSK: num(seq + int64(i) + 1), outboxschema.AttrID: str(id), outboxschema.AttrKey: str(Key(group, id)),
			outboxschema.AttrQueue: str(m.destination()), outboxschema.AttrGroup: str(group), outboxschema.AttrBody: str(m.Body), outboxschema.AttrCreated: num(now.UnixMilli()),
		}
		if len(m.Attributes) > 0 {
			attrs := make(map[string]types.AttributeValue, len(m.Attributes))
			for k, v := range m.Attributes {
				attrs[k] = str(v)
			}
			it[outboxschema.AttrAttrs] = &types.AttributeValueMemberM{Value: attrs}
		}
		puts = append(puts, types.TransactWriteItem{Put: &types.Put{
			TableName:                &o.table,
			Item:                     it,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": outboxschema.AttrPK},
		}})
	}
	return puts
}

// validate refuses what SQS would refuse, so that the relay never holds a
// message it cannot publish.
func (m Message) validate() error {
	switch {
	case m.QueueURL != "" && m.TopicARN != "":
		return errors.New("both QueueURL and TopicARN: give one destination")
	case m.TopicARN != "":
		if !IsTopicARN(m.TopicARN) {
			return fmt.Errorf("TopicARN %q is not an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<name>)", m.TopicARN)
		}
	case !strings.HasPrefix(m.QueueURL, "http://") && !strings.HasPrefix(m.QueueURL, "https://"):
		return fmt.Errorf("QueueURL %q is not a queue URL", m.QueueURL)
	}
	switch {
	case isFIFO(m.destination()) && m.Group == "":
		return fmt.Errorf("a FIFO %s's message needs a Group", kindOf(m.destination()))
	case m.Group != "" && !ValidID(m.Group):
		return fmt.Errorf("group %q: at most %d printable ASCII characters", m.Group, maxIDLen)
	case m.ID != "" && !ValidID(m.ID):
		return fmt.Errorf("id %q: at most %d printable ASCII characters", m.ID, maxIDLen)
	case m.Body == "":
		return errors.New("empty Body: SQS takes at least one character")
	case !validBody(m.Body):
		return errors.New("the body holds characters SQS refuses (it takes #x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to #x10FFFF)")
	case len(m.Attributes) > MaxAttributes:
		return fmt.Errorf("%d attributes: at most %d (the relay adds idempotency-key)", len(m.Attributes), MaxAttributes)
	}
	for k, v := range m.Attributes {
		if err := validAttributeName(k); err != nil {
			return err
		}
		if v == "" || !validBody(v) {
			return fmt.Errorf("attribute %q: a String attribute's value is not empty and holds only characters SQS takes", k)
		}
	}
	// The relay adds the idempotency-key; a random ID is 32 characters.
	id := m.ID
	if id == "" {
		id = strings.Repeat("0", 32)
	}
	if size := sqsSize(m.Body, m.Attributes, Key(m.Group, id)); size > MaxBodyBytes {
		return fmt.Errorf("%d bytes of body and attributes, with the idempotency-key the relay adds: %s takes at most %d", size, serviceOf(m.destination()), MaxBodyBytes)
	}
	return nil
}

// destination is where the message goes: its queue URL or topic ARN, as
// the table stores it (AttrQueue, in the partition key).
func (m Message) destination() string { return cmp.Or(m.TopicARN, m.QueueURL) }

// IsTopicARN reports whether dest, a Message's or a stored destination,
// is an SNS topic's ARN rather than a queue URL. A destination stored
// before topics existed is a queue URL, never an ARN.
func IsTopicARN(dest string) bool {
	// arn:<partition>:sns:<region>:<account>:<name>
	parts := strings.Split(dest, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sns" || parts[3] == "" || len(parts[4]) != 12 {
		return false
	}
	for _, c := range parts[4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	name := strings.TrimSuffix(parts[5], ".fifo")
	if name == "" || len(parts[5]) > 256 {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func kindOf(dest string) string {
	if IsTopicARN(dest) {
		return "topic"
	}
	return "queue"
}

func serviceOf(dest string) string {
	if IsTopicARN(dest) {
		return "SNS"
	}
	return "SQS"
}

// sqsSize is what SQS counts of a message against MaximumMessageSize and a
// batch's total: the body and, for each attribute (the relay's
// idempotency-key, whose value is key, among them), its name, its type
// ("String") and its value.
func sqsSize(body string, attrs map[string]string, key string) int {
	n := len(body) + len(IdempotencyKeyAttribute) + len("String") + len(key)
	for k, v := range attrs {
		n += len(k) + len("String") + len(v)
	}
	return n
}

// ValidID reports whether SQS takes id as a MessageDeduplicationId or a
// MessageGroupId, and so as a Message's ID or Group: 1 to 128 printable
// ASCII characters (alphanumerics and punctuation).
func ValidID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func validBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func validAttributeName(k string) error {
	low := strings.ToLower(k)
	bad := k == "" || len(k) > 256 || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") || strings.Contains(k, "..") ||
		strings.HasPrefix(low, "aws.") || strings.HasPrefix(low, "amazon.") || k == IdempotencyKeyAttribute
	for i := 0; i < len(k) && !bad; i++ {
		c := k[i]
		bad = !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}
	if bad {
		return fmt.Errorf("attribute name %q: 1 to 256 of A-Z a-z 0-9 _ - ., no leading, trailing or double period, not AWS. or Amazon., not idempotency-key (the relay sets it)", k)
	}
	return nil
}

// partitionKey is a group's partition: queue URL, '#', group. A queue URL
// holds no '#'.
func partitionKey(queue, group string) string { return queue + "#" + group }

// shardOf spreads the groups over the pending index's outboxschema.Shards hash keys.
func shardOf(pk string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pk))
	return strconv.Itoa(int(h.Sum32() % outboxschema.Shards))
}

func headKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{outboxschema.AttrPK: str(pk), outboxschema.AttrSK: num(0)}
}

func newID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getN(it map[string]types.AttributeValue, k string) int64 {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func getS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// backoff is a short jittered pause before retrying a transaction that met
// another: 5 ms doubling to 200 ms, jittered by r (nil: the runtime's).
func backoff(r *jitter.Rand, attempt int) time.Duration {
	d := 5 * time.Millisecond << min(attempt, 6)
	return r.Between(min(d, 200*time.Millisecond))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
