package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/awserr"
	"github.com/exactlyonce/exactly/internal/jitter"
)

// SQS is the part of the SQS client the relay uses; *sqs.Client implements
// it.
type SQS interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SNS is the part of the SNS client the relay uses to publish to topics;
// *sns.Client implements it.
type SNS interface {
	PublishBatch(context.Context, *sns.PublishBatchInput, ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// Relay publishes an outbox table's messages to SQS, or to SNS for a
// message whose destination is a topic (Message.TopicARN): the same rules
// hold there, with PublishBatch for SendMessageBatch, SNS's sequence
// numbers for SQS's, and SNS's limits (at most 10 entries and 256 KiB a
// request).
//
// Per group, it reads the head and the messages after the last published
// one with strongly consistent reads, publishes them in sequence order,
// and records its progress in one transaction that advances the head's
// published mark and SQS's sequence number of the group's last message
// published, conditioned on those it read, and marks the messages
// published with a TTL. By default a SendMessageBatch holds at most one
// message per group, so that no failed entry can let a later one of its
// group through; GroupBatch trades that for a hot group's rate, with the
// guarantee it states. A message is published again when the relay dies
// or loses its transaction after SQS took it: every copy carries the same
// MessageDeduplicationId and idempotency-key (Key). Two relays on one table
// publish some messages twice, never out of order: a relay publishes a
// group's message n only after it has read n-1 marked published (or, with
// GroupBatch, in the same SendMessageBatch after it).
//
// The pending index only says which groups to look at; a group missing
// from it for a while (the index is eventually consistent) is delayed,
// never skipped or reordered.
type Relay struct {
	// DB and SQS are the clients; Table the outbox table. SNS is needed
	// only for messages written to a topic: without it, such a group is
	// an error every round (counted in Round.Errors, logged).
	DB    API
	SQS   SQS
	SNS   SNS
	Table string
	// Poll is how long Run waits before looking at the pending index again
	// after a sweep found nothing to publish. Defaults to 1 second.
	Poll time.Duration
	// Retention is how long a published message stays in the table (its
	// TTL) for inspection. Defaults to 24 hours.
	Retention time.Duration
	// PerGroup bounds the messages of one group published per sweep.
	// At most 50; defaults to 10.
	PerGroup int
	// GroupBatch is how many messages of one group one SendMessageBatch
	// may carry, in order: 1 to 10; defaults to 1. Above 1, a hot group
	// moves up to GroupBatch messages per SQS round trip instead of one,
	// and its order rests on SQS refusing, within a batch, either none of
	// a group's messages or only a suffix of them. The relay sees to it
	// for every refusal it can foresee: Write refuses what SQS would
	// refuse of a message, and a run is cut where a queue's
	// MaximumMessageSize, lowered under the relay, could refuse one
	// message and take a later one. What it cannot foresee (an entry
	// failing inside SQS, a refusal it does not know) may let SQS take a
	// message after refusing an earlier one of its group. The relay sees
	// it in SQS's per-entry answer or, when that answer was lost, in SQS's
	// sequence numbers: it compares every number SQS answers for a group
	// with the group's last one (this round's, or the one kept on the
	// group's head item, sqs_seq), and SQS answers a
	// deduplicated send with the first copy's number, so the first answer
	// taking a copy of a later message after SQS took the refused one,
	// within five minutes of the later message's first copy, shows the
	// break, whatever request, round or relay carries it. It then holds
	// the group at the message SQS had out of order, counts it in
	// Round.Reordered and Round.Held, and logs it; worker outbox shows the
	// group held, with a reason beginning with ReorderedHold. The group's
	// consumers may have received the later messages first: the break is
	// detected, not prevented. Not detected: a break no relay answers
	// again within those five minutes (SQS then takes the copies anew,
	// with higher numbers). A lost answer followed by an entry failing
	// inside SQS can hold a group that is in order, as can a message sent
	// again whose first copy reached SQS more than five minutes before a
	// later one's (SQS takes it anew, with a later number).
	// docs/OUTBOX.md has the table, and why it is not the default. With
	// 1, no SQS answer can reorder a group, and the relay keeps the
	// numbers but never holds on them.
	GroupBatch int
	// Concurrency bounds the groups read, published and committed at
	// once. Over many groups it bounds the relay's rate: about Concurrency
	// messages per group round trip (its read, its SendMessageBatch and its
	// progress). Defaults to 32 (DefaultConcurrency).
	Concurrency int
	// Logger receives what goes wrong. Defaults to slog.Default().
	Logger *slog.Logger
	// OnRound, when set, is told what each sweep or drain did.
	OnRound func(Round)
	// Clock, when set, replaces time.Now (tests).
	Clock func() time.Time
	// Rand, when set, is the source of the jitter of retries (tests: a
	// seeded source replays a run). The relay's goroutines draw from it
	// at once: it must be safe for concurrent use. Nil: math/rand/v2's
	// global source.
	Rand rand.Source
}

// Round is what one sweep or drain did.
type Round struct {
	Groups     int           // groups looked at
	Published  int           // messages SQS took (first time or again)
	Duplicates int           // publications known to repeat an earlier one
	Failed     int           // messages SQS refused for good, marked failed and passed
	Held       int           // groups held, waiting for an operator (a sweep's: all it saw)
	Lag        time.Duration // age of the oldest message still to publish (sweeps only)
	Errors     int           // groups left for the next round after an error
	// Reordered counts groups whose order SQS broke within a
	// SendMessageBatch (GroupBatch above 1): it took a message after
	// refusing an earlier one of the group, as its answer, or a later
	// answer's sequence numbers, show. Each is held (see Held), by this
	// relay or, when another recorded the group's progress first, by the
	// next to answer the group's later messages (which counts it again).
	Reordered int
}

// Defaults of the relay's settings.
const (
	DefaultPoll      = time.Second
	DefaultRetention = 24 * time.Hour
	perGroupDefault  = 10
	// DefaultConcurrency is Relay.Concurrency's default: DynamoDB
	// requests of different groups run side by side; each is a round trip
	// of a few milliseconds.
	DefaultConcurrency = 32
	perGroupMax        = 50
	// maxGroupsPerSweep bounds one sweep's work (and memory); the oldest
	// groups of each shard come first.
	maxGroupsPerSweep = 2000
)

// IdempotencyKeyAttribute is the message attribute that carries a
// message's ID to its consumer: the attribute an exactly worker reads its
// dedup key from first.
const IdempotencyKeyAttribute = "idempotency-key"

func (r *Relay) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

func (r *Relay) backoff(attempt int) time.Duration {
	var src *jitter.Rand
	if r.Rand != nil {
		src = jitter.New(r.Rand) // r.Rand serialises the draws itself
	}
	return backoff(src, attempt)
}

func (r *Relay) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

func (r *Relay) perGroup() int {
	switch {
	case r.PerGroup <= 0:
		return perGroupDefault
	case r.PerGroup > perGroupMax:
		return perGroupMax
	}
	return r.PerGroup
}

// Run sweeps until ctx ends: again at once after a sweep that published
// something, after Poll otherwise. It returns nil when ctx ends, once the
// round under way has finished (at most 20s later): a relay stopped
// gracefully leaves nothing published and unrecorded.
func (r *Relay) Run(ctx context.Context) error {
	poll := r.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	for ctx.Err() == nil {
		// A round under way when ctx ends finishes (within roundGrace):
		// cut short, it would leave messages published and not recorded,
		// to be published again by the next relay.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundGrace)
		round, err := r.Sweep(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log().Warn("outbox sweep failed", "table", r.Table, "error", err)
		}
		if err == nil && round.Published+round.Failed > 0 {
			continue
		}
		if sleep(ctx, poll) != nil {
			return nil
		}
	}
	return nil
}

// roundGrace bounds a round of Run, and so how long a relay told to stop
// may take to finish the round under way.
const roundGrace = 20 * time.Second

// head is a group's head item as read.
type head struct {
	pk, queue, group string
	seq, sent        int64
	since            int64  // ms; 0 when not pending
	held             string // why the group is held; "" when not
	heldSeq          int64
	// sqsSeq is SQS's sequence number of the group's last message
	// recorded published ("" when none is kept: a standard queue, a head
	// written before it was, or one an operator's Release or Drop
	// cleared).
	sqsSeq string
	// read is the mark as read from the table, sent's first value: what
	// progress is conditioned on. accept may move sent on past messages
	// marked published (a head read behind its items); the head in the
	// table still says read, and a relay comparing its own moved mark
	// with the table's would take its failed write for another relay's
	// record, and never record the group's progress.
	read int64
}

func readHead(it map[string]types.AttributeValue) head {
	return head{
		pk: getS(it, outboxschema.AttrPK), queue: getS(it, outboxschema.AttrQueue), group: getS(it, outboxschema.AttrGroup),
		seq: getN(it, outboxschema.AttrSeq), sent: getN(it, outboxschema.AttrSent), since: getN(it, outboxschema.AttrSince),
		held: getS(it, outboxschema.AttrHeld), heldSeq: getN(it, outboxschema.AttrHeldSeq),
		sqsSeq: getS(it, outboxschema.AttrSQSSeq), read: getN(it, outboxschema.AttrSent),
	}
}

// Sweep reads the pending index (every shard, oldest first) and publishes
// what the groups it names hold, as Drain does. Round.Lag is the age of the
// oldest pending message the index showed. A shard it cannot read waits
// for the next sweep (the error says which); the others are published.
func (r *Relay) Sweep(ctx context.Context) (Round, error) {
	// The shards are read side by side, each up to its share of the
	// sweep's groups (oldest first).
	perShard := make([][]head, outboxschema.Shards)
	errs := make([]error, outboxschema.Shards)
	r.each(outboxschema.Shards, func(s int) {
		var start map[string]types.AttributeValue
		for {
			out, err := r.DB.Query(ctx, &dynamodb.QueryInput{
				TableName:                 &r.Table,
				IndexName:                 aws.String(outboxschema.PendingIndex),
				KeyConditionExpression:    aws.String("#shard = :s"),
				ExpressionAttributeNames:  map[string]string{"#shard": outboxschema.AttrShard},
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(strconv.Itoa(s))},
				ExclusiveStartKey:         start,
			})
			if err != nil {
				errs[s] = fmt.Errorf("outbox: read pending index: %w", err)
				return
			}
			for _, it := range out.Items {
				if len(perShard[s]) < maxGroupsPerSweep/outboxschema.Shards {
					perShard[s] = append(perShard[s], readHead(it))
				}
			}
			start = out.LastEvaluatedKey
			if len(start) == 0 || len(perShard[s]) == maxGroupsPerSweep/outboxschema.Shards {
				return
			}
		}
	})
	// A shard that could not be read waits for the next sweep; the others
	// go on.
	var heads []head
	oldest := int64(0)
	for _, hs := range perShard {
		for _, h := range hs {
			if oldest == 0 || h.since < oldest {
				oldest = h.since
			}
		}
		heads = append(heads, hs...)
	}
	round := r.drain(ctx, heads, false)
	if oldest > 0 {
		round.Lag = max(0, r.now().Sub(time.UnixMilli(oldest)))
	}
	r.report(round)
	return round, errors.Join(errs...)
}

// Drain publishes what the named groups hold (partition keys, as a stream
// record's keys carry them), reading their heads first. The Lambda handler
// of the table's stream calls it.
func (r *Relay) Drain(ctx context.Context, pks []string) (Round, error) {
	var heads []head
	seen := map[string]bool{}
	for _, pk := range pks {
		if seen[pk] {
			continue
		}
		seen[pk] = true
		heads = append(heads, head{pk: pk})
	}
	round := r.drain(ctx, heads, true)
	r.report(round)
	return round, nil
}

func (r *Relay) report(round Round) {
	if r.OnRound != nil {
		r.OnRound(round)
	}
}

// pendingMsg is a message item read by the relay.
type pendingMsg struct {
	seq     int64
	id      string
	key     string // its MessageDeduplicationId and idempotency-key
	body    string
	attrs   map[string]string
	created int64

	sent   bool
	failed string // why SQS refused it for good
}

// lane is one group's work in a round.
type lane struct {
	h       head
	msgs    []pendingMsg // to publish, in order from h.sent+1
	next    int64        // created (ms) of the message after msgs, when read
	done    int          // msgs published (or failed) so far this round
	stopped bool         // a publication failed: publish no more this round
	err     error        // reading or recording failed: nothing recorded
	pubErr  error        // publishing failed: what was done is recorded
	hold    string       // SQS refused msgs[done] so that the group is to be held: why
	// last is SQS's sequence number of the group's last message taken:
	// the head's (h.sqsSeq), then this round's; lastSeq is that message.
	last    string
	lastSeq int64
}

// drain runs one round over heads: read, publish, commit.
func (r *Relay) drain(ctx context.Context, heads []head, readHeads bool) Round {
	round := Round{Groups: len(heads)}
	lanes := make([]*lane, len(heads))
	for i, h := range heads {
		lanes[i] = &lane{h: h}
	}
	if readHeads {
		r.each(len(lanes), func(i int) { lanes[i].err = r.load(ctx, lanes[i], true) })
	} else {
		r.loadIndexed(ctx, lanes)
	}
	r.publish(ctx, lanes, &round)
	var progressed []*lane
	for _, l := range lanes {
		if l.err == nil && (l.done > 0 || l.hold != "" || l.h.seq == l.h.sent && l.h.since != 0 && l.h.held == "") {
			progressed = append(progressed, l)
		}
	}
	r.commitLanes(ctx, progressed, &round)
	for _, l := range lanes {
		if l.err == nil && (l.h.held != "" || l.hold != "") {
			round.Held++
		}
		if err := cmp.Or(l.err, l.pubErr); err != nil {
			round.Errors++
			r.log().Warn("outbox group left for the next round", "table", r.Table, "group", l.h.pk, "error", err)
		}
	}
	return round
}

// each runs f(0..n-1) on at most Concurrency goroutines and waits.
func (r *Relay) each(n int, f func(i int)) {
	conc := r.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// load reads a group's head (when asked, or when the index's copy is behind)
// and the messages after its published mark, strongly consistent. The
// messages to publish are those from the mark on, without a gap: a message
// of a transaction that is still being applied may show before an earlier
// one of the same transaction, and publishing it first would reorder.
func (r *Relay) load(ctx context.Context, l *lane, fresh bool) error {
	if fresh {
		out, err := r.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &r.Table, Key: headKey(l.h.pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("read head: %w", err)
		}
		if out.Item == nil {
			l.h = head{pk: l.h.pk}
			return nil
		}
		l.h = readHead(out.Item)
	}
	if l.h.held != "" {
		return nil // an operator decides (Release, Drop)
	}
	out, err := r.DB.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &r.Table,
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :sent"),
		ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(l.h.pk), ":sent": num(l.h.sent)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(r.perGroup() + 1)), // one more: its age is the lag left
	})
	if err != nil {
		return fmt.Errorf("read messages: %w", err)
	}
	if r.accept(l, out.Items) && !fresh {
		// The index's copy of the head is older than the messages kept:
		// read the head itself.
		l.msgs, l.next = nil, 0
		return r.load(ctx, l, true)
	}
	return nil
}

// accept takes a group's message items, read strongly consistent in
// sequence order from the head's mark on: those to publish, contiguous
// from the mark (a gap means a message of a transaction still being
// applied: the rest waits), at most PerGroup, and the age of the one after.
// Items already marked published before the first unmarked one move the
// mark on (the index's copy of the head was behind); a marked item after an
// unmarked one ends what is taken. It reports whether the head read was
// older than the items kept: a gap before the first item, or the mark
// moved on (the SQS sequence number read with the head is then older than
// the mark's).
func (r *Relay) accept(l *lane, items []map[string]types.AttributeValue) (stale bool) {
	next := l.h.sent + 1
	for i, it := range items {
		m := pendingMsg{
			seq: getN(it, outboxschema.AttrSK), id: getS(it, outboxschema.AttrID), body: getS(it, outboxschema.AttrBody), created: getN(it, outboxschema.AttrCreated),
			sent: it[outboxschema.AttrSentAt] != nil,
		}
		// An item written before keys included the group keeps the id
		// alone: a copy published again must carry the key of the first.
		m.key = cmp.Or(getS(it, outboxschema.AttrKey), m.id)
		if m.seq != next {
			return stale || i == 0 && m.seq > next
		}
		if len(l.msgs) == r.perGroup() {
			if !m.sent {
				l.next = m.created
			}
			break
		}
		if m.sent {
			if len(l.msgs) > 0 {
				// Marked after one that is not: a read that met the
				// transaction marking them (read-committed, item by
				// item). Taking the mark from it would skip the messages
				// between; what was taken is published again at worst.
				break
			}
			next++
			l.h.sent = m.seq
			stale = true
			continue
		}
		next++
		if a, ok := it[outboxschema.AttrAttrs].(*types.AttributeValueMemberM); ok {
			m.attrs = make(map[string]string, len(a.Value))
			for k, v := range a.Value {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					m.attrs[k] = s.Value
				}
			}
		}
		l.msgs = append(l.msgs, m)
	}
	if l.h.queue == "" && len(items) > 0 {
		l.h.queue, l.h.group = getS(items[0], outboxschema.AttrQueue), getS(items[0], outboxschema.AttrGroup)
	}
	return stale
}

// loadIndexed reads the messages of lanes whose heads came from the index:
// by key (from the head's mark to its sequence number, PerGroup and one
// more at most), strongly consistent, in BatchGetItem requests of up to
// 100 keys across groups: a sweep over many groups with a message each
// would otherwise spend a Query per message. A lane whose keys could not
// be read, or whose first key is missing, is loaded alone (load).
func (r *Relay) loadIndexed(ctx context.Context, lanes []*lane) {
	type key struct {
		l  *lane
		sk int64
	}
	var keys []key
	for _, l := range lanes {
		if l.h.held != "" {
			continue // an operator decides (Release, Drop)
		}
		for sk := l.h.sent + 1; sk <= min(l.h.seq, l.h.sent+int64(r.perGroup())+1); sk++ {
			keys = append(keys, key{l, sk})
		}
	}
	got := make(map[*lane][]map[string]types.AttributeValue, len(lanes))
	failed := map[*lane]bool{}
	var mu sync.Mutex
	chunks := slices.Collect(slices.Chunk(keys, 100))
	r.each(len(chunks), func(i int) {
		ks := chunks[i]
		req := make([]map[string]types.AttributeValue, len(ks))
		byKey := map[string]*lane{}
		for j, k := range ks {
			req[j] = map[string]types.AttributeValue{outboxschema.AttrPK: str(k.l.h.pk), outboxschema.AttrSK: num(k.sk)}
			byKey[k.l.h.pk+"\x00"+strconv.FormatInt(k.sk, 10)] = k.l
		}
		var items []map[string]types.AttributeValue
		for attempt := 0; len(req) > 0; attempt++ {
			out, err := r.DB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				r.Table: {Keys: req, ConsistentRead: aws.Bool(true)},
			}})
			if err != nil || attempt == 3 {
				mu.Lock()
				for _, k := range ks {
					failed[k.l] = true
				}
				mu.Unlock()
				return
			}
			items = append(items, out.Responses[r.Table]...)
			req = out.UnprocessedKeys[r.Table].Keys // throttled: again, after a pause
			if len(req) > 0 && sleep(ctx, r.backoff(attempt)) != nil {
				return
			}
		}
		mu.Lock()
		for _, it := range items {
			l := byKey[getS(it, outboxschema.AttrPK)+"\x00"+strconv.FormatInt(getN(it, outboxschema.AttrSK), 10)]
			got[l] = append(got[l], it)
		}
		mu.Unlock()
	})
	r.each(len(lanes), func(i int) {
		l := lanes[i]
		if l.h.held != "" {
			return
		}
		if failed[l] {
			l.err = r.load(ctx, l, false)
			return
		}
		items := got[l]
		sort.Slice(items, func(a, b int) bool { return getN(items[a], outboxschema.AttrSK) < getN(items[b], outboxschema.AttrSK) })
		if l.h.seq > l.h.sent && (len(items) == 0 || r.accept(l, items)) {
			// The first key was not there: the index's copy of the head
			// is older than the items kept (or a transaction is still
			// being applied). Read the group itself.
			l.msgs, l.next = nil, 0
			l.err = r.load(ctx, l, true)
		}
	})
}

// run is the messages of one lane that one SendMessageBatch carries, in
// order: msgs[from : from+n].
type run struct {
	l       *lane
	from, n int
}

// publish sends the lanes' messages in steps: each step sends every lane's
// next run (one message, or up to GroupBatch of them in order), a lane's
// run always in one SendMessageBatch, and a failed message stops its group
// for the round.
func (r *Relay) publish(ctx context.Context, lanes []*lane, round *Round) {
	for _, l := range lanes {
		l.last, l.lastSeq = l.h.sqsSeq, l.h.read
	}
	for {
		byQueue := map[string][]run{}
		var queues []string
		for _, l := range lanes {
			if l.err != nil || l.stopped || l.done >= len(l.msgs) {
				continue
			}
			if byQueue[l.h.queue] == nil {
				queues = append(queues, l.h.queue)
			}
			byQueue[l.h.queue] = append(byQueue[l.h.queue], run{l: l, from: l.done, n: r.runLength(l)})
		}
		if len(queues) == 0 {
			return
		}
		sort.Strings(queues)
		var batches [][]run
		for _, q := range queues {
			batches = append(batches, batchesOf(byQueue[q])...)
		}
		var mu sync.Mutex
		r.each(len(batches), func(i int) {
			r.sendBatch(ctx, batches[i], &mu, round)
		})
	}
}

// Limits of a SendMessageBatch request, SQS's; SNS's PublishBatch takes as
// many entries but at most maxTopicBatchBytes together.
const (
	maxBatchEntries    = 10
	maxBatchBytes      = 1 << 20
	maxTopicBatchBytes = 256 * 1024
	// minMaximumMessageSize is the lowest MaximumMessageSize a queue can
	// be given: a message no larger is never refused for its size.
	minMaximumMessageSize = 1024
)

// runLength is how many of a lane's messages, from its next one, go in
// one SendMessageBatch: up to GroupBatch, within a batch's bytes, and cut
// where a message is smaller than an earlier one of the run that is over
// minMaximumMessageSize. A queue's MaximumMessageSize, which an operator
// may lower at any time, then refuses either no message of a run or a
// suffix of it, never one message and not a later one: the one refusal
// that is about the queue and not the message cannot break the group's
// order.
func (r *Relay) runLength(l *lane) int {
	g := r.groupBatch()
	if l.h.heldSeq == l.msgs[l.done].seq {
		// Released after a hold: alone, so that SQS's answers to the
		// copies of messages it took after refusing this one are not
		// compared with this one's.
		g = 1
	}
	first := l.msgs[l.done].size()
	bytes, big := first, 0
	if first > minMaximumMessageSize {
		big = first
	}
	n := 1
	for ; n < g && l.done+n < len(l.msgs); n++ {
		s := l.msgs[l.done+n].size()
		if s < big || bytes+s > batchBytes(l.h.queue) {
			break
		}
		bytes += s
		if s > minMaximumMessageSize {
			big = s
		}
	}
	return n
}

func (r *Relay) groupBatch() int {
	return min(max(r.GroupBatch, 1), maxBatchEntries)
}

// size is a run's SQS-counted bytes.
func (ru run) size() int {
	n := 0
	for _, m := range ru.l.msgs[ru.from : ru.from+ru.n] {
		n += m.size()
	}
	return n
}

// batchesOf cuts the runs of one queue into SendMessageBatch requests: at
// most maxBatchEntries messages, and at most maxBatchBytes of SQS-counted
// size together (SQS refuses the whole request past it,
// BatchRequestTooLong). A run is never split: two requests racing could
// reorder its group.
func batchesOf(runs []run) [][]run {
	var out [][]run
	var cur []run
	n, w := 0, 0
	for _, ru := range runs {
		s := ru.size()
		if len(cur) > 0 && (n+ru.n > maxBatchEntries || w+s > batchBytes(ru.l.h.queue)) {
			out = append(out, cur)
			cur, n, w = nil, 0, 0
		}
		cur = append(cur, ru)
		n += ru.n
		w += s
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// batchBytes is the most one request to dest may carry: SQS's batch
// total, or SNS's for a topic.
func batchBytes(dest string) int {
	if IsTopicARN(dest) {
		return maxTopicBatchBytes
	}
	return maxBatchBytes
}

// pack cuts xs, in order, into runs of at most maxN elements whose weights
// add up to at most maxW (an element heavier than maxW alone).
func pack[T any](xs []T, maxN, maxW int, weight func(T) int) [][]T {
	var out [][]T
	var cur []T
	w := 0
	for _, x := range xs {
		n := weight(x)
		if len(cur) == maxN || len(cur) > 0 && w+n > maxW {
			out = append(out, cur)
			cur, w = nil, 0
		}
		cur = append(cur, x)
		w += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// size is what SQS counts of the message as the relay sends it.
func (m *pendingMsg) size() int { return sqsSize(m.body, m.attrs, m.key) }

// failCodes are the SendMessageBatch entry refusals about what the message
// itself holds, which its producer could know and Write refuses already
// (characters SQS does not take, attribute names): no retry, release or
// queue setting changes them, so the message is marked failed and its
// group goes on. Every other refusal an entry gets for good (SenderFault:
// InvalidParameterValue for a size over the queue's MaximumMessageSize,
// which an operator may lower at any time, or codes unknown here) holds
// the group for an operator: a group's order is never broken, nor a
// message skipped, for a reason the producer could not know. Failures of
// the whole request (queue missing, access or KMS denied, throttling) are
// retried every round and counted as errors.
var failCodes = []string{"InvalidMessageContents", "InvalidAttributeName", "InvalidAttributeValue"}

// ReorderedHold begins the reason a group is held for when SQS took a
// message of it in a SendMessageBatch after refusing an earlier one of the
// same group (GroupBatch above 1).
const ReorderedHold = "Reordered"

func (r *Relay) sendBatch(ctx context.Context, runs []run, mu *sync.Mutex, round *Round) {
	queue := runs[0].l.h.queue
	fifo := isFIFO(queue)
	// Above one message of a group per request, a number below the
	// group's last one is a break SQS made (holdOnSeq). One at a time, no
	// answer can break a group's order: such a number there only says
	// that SQS took an earlier message's copy anew, past its five-minute
	// deduplication window, after a later one's first copy.
	holdOnSeq := fifo && r.groupBatch() > 1
	var entries []sqstypes.SendMessageBatchRequestEntry
	for _, ru := range runs {
		for _, m := range ru.l.msgs[ru.from : ru.from+ru.n] {
			attrs := make(map[string]sqstypes.MessageAttributeValue, len(m.attrs)+1)
			for k, v := range m.attrs {
				attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
			attrs[IdempotencyKeyAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.key)}
			e := sqstypes.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(len(entries))),
				MessageBody:       aws.String(m.body),
				MessageAttributes: attrs,
			}
			if fifo {
				e.MessageGroupId = aws.String(ru.l.h.group)
				e.MessageDeduplicationId = aws.String(m.key)
			}
			entries = append(entries, e)
		}
	}
	out, err := r.sendEntries(ctx, queue, entries)
	if err != nil && awserr.Code(err) == "BatchRequestTooLong" {
		switch {
		case len(runs) > 1:
			// SQS counts more than the relay did: halves, each on its own.
			r.sendBatch(ctx, runs[:len(runs)/2], mu, round)
			r.sendBatch(ctx, runs[len(runs)/2:], mu, round)
		case runs[0].n > 1:
			// The run's first message alone; the rest in the next step.
			r.sendBatch(ctx, []run{{l: runs[0].l, from: runs[0].from, n: 1}}, mu, round)
		default:
			l := runs[0].l
			mu.Lock()
			l.stopped = true
			l.hold = "BatchRequestTooLong: " + err.Error()
			mu.Unlock()
			r.log().Error("outbox message too long on its own; group held", "queue", queue, "group", l.h.group, "id", l.msgs[runs[0].from].id)
		}
		return
	}
	if err != nil {
		mu.Lock()
		for _, ru := range runs {
			ru.l.stopped = true
			ru.l.pubErr = fmt.Errorf("publish to %s: %w", queue, err)
		}
		mu.Unlock()
		return
	}
	failed := map[string]sqstypes.BatchResultErrorEntry{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	ok := map[string]bool{}
	sqsSeq := map[string]string{}
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
		sqsSeq[aws.ToString(s.Id)] = aws.ToString(s.SequenceNumber)
	}
	mu.Lock()
	defer mu.Unlock()
	i := 0
	for _, ru := range runs {
		l := ru.l
		var ahead []int64 // taken by SQS after an earlier message of the run was not
		broken := ""      // why the sequence numbers say SQS had it out of order
		for k := range ru.n {
			id := strconv.Itoa(i)
			i++
			m := &l.msgs[ru.from+k]
			f, bad := failed[id]
			if l.stopped {
				if ok[id] {
					ahead = append(ahead, m.seq)
				}
				continue
			}
			switch {
			case ok[id]:
				switch s := sqsSeq[id]; {
				case !fifo || s == "":
				case m.seq == l.h.heldSeq && l.h.sqsSeq == "":
					// Released after a Reordered hold (Release cleared
					// the head's number): the messages after it that
					// SQS took before it, the break the operator saw,
					// answer with numbers below its own. Not kept.
				case holdOnSeq && l.last != "" && !seqAfter(s, l.last):
					// SQS answers a send it deduplicates with the first
					// copy's sequence number: one below an earlier
					// message's (in this round, or the last one recorded,
					// kept on the head) means SQS had this one first (a
					// request whose answer was lost took it after
					// refusing the earlier one).
					l.stopped = true
					broken = fmt.Sprintf("SQS had message %d before message %d (sequence numbers %s and %s), from an earlier request whose answer was lost", m.seq, l.lastSeq, s, l.last)
					continue
				default:
					l.last, l.lastSeq = s, m.seq
				}
				m.sent = true
				l.done++
				round.Published++
			case bad && f.SenderFault && slices.Contains(failCodes, awserr.TrimCode(aws.ToString(f.Code))):
				m.failed = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
				l.done++
				round.Failed++
				r.log().Error("outbox message refused for good; marked failed and passed", "queue", queue, "group", l.h.group, "id", m.id, "error", m.failed)
			case bad && f.SenderFault:
				l.stopped = true
				l.hold = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
				r.log().Error("outbox message refused; group held until an operator releases it or drops the message", "queue", queue, "group", l.h.group, "id", m.id, "error", l.hold)
			default:
				l.stopped = true
				if bad {
					l.pubErr = fmt.Errorf("publish to %s: %s: %s", queue, aws.ToString(f.Code), aws.ToString(f.Message))
				} else {
					l.pubErr = fmt.Errorf("publish to %s: SQS reported neither success nor failure for the message", queue)
				}
			}
		}
		if fifo && (broken != "" || len(ahead) > 0) {
			r.reordered(l, broken, ahead, round)
		}
	}
}

// sendEntries sends one batch to dest: SendMessageBatch to a queue, or
// PublishBatch to a topic, whose answer it gives in SendMessageBatch's
// form (the same ids, sequence numbers and per-entry refusals).
func (r *Relay) sendEntries(ctx context.Context, dest string, entries []sqstypes.SendMessageBatchRequestEntry) (*sqs.SendMessageBatchOutput, error) {
	if !IsTopicARN(dest) {
		return r.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(dest), Entries: entries})
	}
	if r.SNS == nil {
		return nil, errors.New("the relay has no SNS client (Relay.SNS) for a topic")
	}
	in := &sns.PublishBatchInput{TopicArn: aws.String(dest)}
	for _, e := range entries {
		attrs := make(map[string]snstypes.MessageAttributeValue, len(e.MessageAttributes))
		for k, v := range e.MessageAttributes {
			attrs[k] = snstypes.MessageAttributeValue{DataType: v.DataType, StringValue: v.StringValue}
		}
		in.PublishBatchRequestEntries = append(in.PublishBatchRequestEntries, snstypes.PublishBatchRequestEntry{
			Id:                     e.Id,
			Message:                e.MessageBody,
			MessageAttributes:      attrs,
			MessageGroupId:         e.MessageGroupId,
			MessageDeduplicationId: e.MessageDeduplicationId,
		})
	}
	pout, err := r.SNS.PublishBatch(ctx, in)
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, ok := range pout.Successful {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: ok.Id, MessageId: ok.MessageId, SequenceNumber: ok.SequenceNumber})
	}
	for _, f := range pout.Failed {
		out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: f.Id, Code: f.Code, Message: f.Message, SenderFault: f.SenderFault})
	}
	return out, nil
}

// seqAfter reports whether SQS sequence number a is greater than b
// (decimal, no leading zeros, up to 128 bits): sqsmsg.SequenceLess's
// order, which this package cannot import (sqsmsg imports it).
func seqAfter(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// reordered holds a lane whose run shows SQS broke the group's order: it
// took the messages ahead after refusing l.msgs[l.done], or (broken) it
// had l.msgs[l.done] before an earlier message of the group. The group's
// consumers may get them out of order. The group is held at l.msgs[l.done];
// an operator's Release publishes it again and the ones after (SQS drops
// the copies of those it took within its five-minute deduplication
// window, and a consumer that deduplicates by idempotency-key, after it).
func (r *Relay) reordered(l *lane, broken string, ahead []int64, round *Round) {
	m := l.msgs[l.done]
	if broken == "" {
		cause := l.hold
		if cause == "" && l.pubErr != nil {
			cause = l.pubErr.Error()
		}
		broken = fmt.Sprintf("SQS took message(s) %v of the group in the same SendMessageBatch after refusing message %d (%s)", ahead, m.seq, cause)
	}
	l.hold = ReorderedHold + ": " + broken + "; its consumers may have got them out of order"
	l.pubErr = nil
	round.Reordered++
	r.log().Error("outbox group reordered at SQS; group held until an operator releases it or drops the message",
		"queue", l.h.queue, "group", l.h.group, "id", m.id, "error", l.hold)
}

// progress is the transaction that records a lane's progress: the head's
// mark moves from what was read to the last message done (conditioned on
// the former: a relay that lost the race records nothing), and those
// messages get their sent time and TTL. With drained, the group leaves the
// pending index, conditioned on no message having been added since it was
// read; otherwise its age is that of the oldest message left. The head's
// update comes first.
func (r *Relay) progress(l *lane, now time.Time, drained bool) []types.TransactWriteItem {
	retention := r.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	last := l.h.sent + int64(l.done)
	names := map[string]string{"#sent": outboxschema.AttrSent, "#held": outboxschema.AttrHeld}
	values := map[string]types.AttributeValue{":last": num(last)}
	// A held group's head is an operator's to change (a relay that read
	// it before the hold records nothing). A mark of 0 is no mark, or the
	// 0 a hold at the group's first message recorded.
	cond := "attribute_not_exists(#held) AND #sent = :read"
	values[":read"] = num(l.h.read)
	if l.h.read == 0 {
		cond = "attribute_not_exists(#held) AND (attribute_not_exists(#sent) OR #sent = :read)"
	}
	// SQS's number of the group's last message moves with the mark, from
	// the one read: two relays cannot both advance it, nor one keep a
	// number older than the mark it records (a head read behind the
	// items, whose mark accept moved on).
	names["#sqsseq"] = outboxschema.AttrSQSSeq
	if l.h.sqsSeq == "" {
		cond += " AND attribute_not_exists(#sqsseq)"
	} else {
		cond += " AND #sqsseq = :rsqs"
		values[":rsqs"] = str(l.h.sqsSeq)
	}
	upd := "SET #sent = :last"
	if l.last != "" && l.last != l.h.sqsSeq {
		upd += ", #sqsseq = :sqs"
		values[":sqs"] = str(l.last)
	}
	if l.hold != "" {
		drained = false
		upd += ", #held = :why, #hseq = :hseq"
		names["#hseq"] = outboxschema.AttrHeldSeq
		values[":why"], values[":hseq"] = str(l.hold), num(l.msgs[l.done].seq)
	}
	if drained {
		upd += " REMOVE #shard, #since"
		cond += " AND #seq = :last"
		names["#shard"], names["#since"], names["#seq"] = outboxschema.AttrShard, outboxschema.AttrSince, outboxschema.AttrSeq
	} else {
		// Still pending: the oldest message left says how late the group
		// is (now when it was not read).
		next := now.UnixMilli()
		if l.done < len(l.msgs) {
			next = l.msgs[l.done].created
		} else if l.next != 0 {
			next = l.next
		}
		upd += ", #since = :next"
		names["#since"] = outboxschema.AttrSince
		values[":next"] = num(next)
	}
	items := make([]types.TransactWriteItem, 0, l.done+2)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName: &r.Table, Key: headKey(l.h.pk), UpdateExpression: aws.String(upd), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	if l.hold != "" {
		// Why, on the message too, for worker outbox to show.
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &r.Table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(l.h.pk), outboxschema.AttrSK: num(l.msgs[l.done].seq)},
			UpdateExpression: aws.String("SET #held = :why"), ConditionExpression: aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames:  map[string]string{"#held": outboxschema.AttrHeld, "#pk": outboxschema.AttrPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":why": str(l.hold)},
		}})
	}
	for _, m := range l.msgs[:l.done] {
		set := "SET #at = :now, #ttl = :ttl"
		values := map[string]types.AttributeValue{":now": num(now.UnixMilli()), ":ttl": num(now.Add(retention).Unix())}
		names := map[string]string{"#at": outboxschema.AttrSentAt, "#ttl": outboxschema.AttrTTL, "#pk": outboxschema.AttrPK}
		if m.failed != "" {
			set += ", #failed = :why"
			names["#failed"] = outboxschema.AttrFailed
			values[":why"] = str(m.failed)
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &r.Table, Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(l.h.pk), outboxschema.AttrSK: num(m.seq)},
			UpdateExpression: aws.String(set), ConditionExpression: aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		}})
	}
	return items
}

// drained reports whether a lane's round published everything its head
// said the group held.
func (l *lane) drained() bool { return l.h.sent+int64(l.done) == l.h.seq }

// maxTxItems is DynamoDB's limit on a transaction's items.
const maxTxItems = 100

// commitLanes records the lanes' progress: several lanes' in one
// transaction while they fit (fewer requests: a sweep over many groups
// with a message each would otherwise spend a transaction per message);
// a shared transaction that fails (a head moved: a relay raced, a message
// was added) leaves each of its lanes to commit alone, which judges its
// own case.
func (r *Relay) commitLanes(ctx context.Context, lanes []*lane, round *Round) {
	now := r.now()
	batches := pack(lanes, len(lanes), maxTxItems, func(l *lane) int { return len(r.progress(l, now, false)) })
	var mu sync.Mutex
	r.each(len(batches), func(i int) {
		b := batches[i]
		if len(b) > 1 {
			var items []types.TransactWriteItem
			for _, l := range b {
				items = append(items, r.progress(l, now, l.drained())...)
			}
			if _, err := r.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err == nil {
				return
			}
		}
		for _, l := range b {
			l.err = r.commit(ctx, l, now, &mu, round)
		}
	})
}

// commit records one lane's progress alone, judging a failed condition:
// another relay recorded first (its publications were repeats), or
// messages were added (the group stays pending); a conflict is retried.
func (r *Relay) commit(ctx context.Context, l *lane, now time.Time, mu *sync.Mutex, round *Round) error {
	last := l.h.sent + int64(l.done)
	drained := l.drained()
	for attempt := 0; ; attempt++ {
		_, err := r.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: r.progress(l, now, drained)})
		if err == nil {
			return nil
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			old := readHead(tce.CancellationReasons[0].Item)
			switch {
			case old.sent == last:
				return nil // recorded already (a shared transaction whose answer was lost)
			case old.sent != l.h.read:
				// Another relay recorded first: what this one sent since
				// its read was published again. A hold this one meant is
				// not written (the next relay to publish the group's
				// messages reads the break again, in SQS's sequence
				// numbers against the head's).
				mu.Lock()
				round.Duplicates += l.done
				l.hold = ""
				mu.Unlock()
				return nil
			case old.sqsSeq != l.h.sqsSeq:
				// The head read was older than the mark the items showed
				// (accept moved it on), or an operator released or
				// dropped since: the numbers compared may not have been
				// the group's last. Nothing recorded; the next round
				// publishes the messages again (SQS drops the copies)
				// and compares them with the head's number.
				return fmt.Errorf("record progress to %d: the group's SQS sequence number moved since it was read", last)
			case drained && attempt < 2:
				drained = false // messages were added: the group stays pending
				continue
			}
		}
		if awserr.TransactionConflict(err) && attempt < 3 {
			if err := sleep(ctx, r.backoff(attempt)); err != nil {
				return err
			}
			continue
		}
		return fmt.Errorf("record progress to %d: %w", last, err)
	}
}

func isFIFO(queueURL string) bool { return len(queueURL) > 5 && queueURL[len(queueURL)-5:] == ".fifo" }
