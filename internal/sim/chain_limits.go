package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/ddblimit"
	"github.com/exactlyonce/exactly/outbox"
)

// DynamoDB's limits on the chain's paths (issue 19), in the chain seeds
// that draw them (1 in chainLimEvery). A limiter process, faulted as the
// others, writes through the outbox:
//
//   - The producer's Write at the limits (groups "w<k>" of the limits
//     queue, nobody consumes it; check reads it): one message and the
//     caller's writes making a transaction of 99, 100 or 101 actions, a
//     put of 400 KB - 1, 400 KB or 400 KB + 1, or 4 MB - 16 KiB, 4 MB or
//     4 MB + 1 by the product's count (limits.go's classes and limFill).
//     Over a limit Write must return ErrInvalid before any request; at
//     exactly 4 MB DynamoDB refuses it (memdynamo counts the keys on top)
//     and Write must return ErrInvalid too. Either way nothing of it is
//     written, nothing published. The others commit once and are
//     published once.
//   - The worker's commit at the limits: a deposit of an account "L<k>"
//     each, whose first stage's ledger commit (the record, the ledger's
//     two writes, the confirmation's two outbox items) the effect fills
//     to class k. Past a limit (4 MB exactly included, as in limits.go)
//     the deposit ends in the first DLQ, never applied nor confirmed, and
//     the product sent no request with its writes (4 MB exactly: only in
//     transactional mode, refused by DynamoDB); at and under, applied and
//     confirmed once.
//   - The relays' reads: 26 groups of 5 messages ("r<g>"), written before
//     any relay starts, so that a sweep asks for more than 100 keys
//     (PerGroup 4 in limit seeds: 5 keys a group): calls of 100 and the
//     rest. In a third of these seeds the messages of 22 groups are within
//     320 bytes of 256 KiB: a BatchGetItem answer is cut at 16 MB
//     (UnprocessedKeys) when its 100 keys hold 64 of them, and a group
//     read alone (the Lambda relay's Drain names these groups too) is a
//     Query of Limit 5 whose page DynamoDB cuts at 1 MB, after 4 of them.
//     No BatchGetItem may ask for more than 100 keys; every message is
//     published, once, in order.
//
// No TransactWriteItems of the chain may pass a limit by the product's
// count (pastLimits).
const (
	chainLimEvery      = 8
	chainLimQueue      = "limits.fifo"
	chainLimReadGroups = 26
	chainLimReadMsgs   = 5
	chainLimReadBig    = 22
)

// chainLims is the limit workload of a chain seed.
type chainLims struct {
	on, big bool
	reads   atomic.Bool // the reads load is written: relays may start
	written atomic.Bool // every limit Write answered

	mu   sync.Mutex
	reqs map[string]int // class tag ("w3", "L3") -> requests carrying its writes
}

func newChainLims(seed uint64) *chainLims {
	x := hash64(seed, "chain limits")
	on := x%chainLimEvery == 0
	return &chainLims{on: on, big: on && (x>>8)%3 == 0, reqs: map[string]int{}}
}

func limTagPK(tag string, i int) string { return fmt.Sprintf("clim#%s#%d", tag, i) }

// limKindOf is the class of a limit tag ("w3", "L3": 3).
func limKindOf(tag string) limKind {
	k, _ := strconv.Atoi(tag[1:])
	return limKind(k)
}

// limRequest judges a TransactWriteItems of the chain before any fault:
// within DynamoDB's limits by the product's count, and counted against the
// limit classes whose writes it carries.
func (c *chain) limRequest(p *cproc, in *dynamodb.TransactWriteItemsInput) {
	for _, v := range pastLimits(p.id, in, "chain") {
		c.violate("%s", v)
	}
	if !c.lim.on {
		return
	}
	tags := map[string]bool{}
	for _, pk := range txPKs(in) {
		if rest, ok := strings.CutPrefix(pk, "clim#"); ok && (rest[0] == 'w' || rest[0] == 'L' || rest[0] == 'e') {
			tags[rest[:strings.IndexByte(rest, '#')]] = true
		}
	}
	n, bytes := len(in.TransactItems), ddblimit.TransactionBytes(in.TransactItems)
	biggest := 0
	for _, it := range in.TransactItems {
		if it.Put != nil {
			biggest = max(biggest, ddblimit.ItemSize(it.Put.Item))
		}
	}
	c.lim.mu.Lock()
	defer c.lim.mu.Unlock()
	for tag := range tags {
		c.lim.reqs[tag]++
		if tag[0] == 'e' {
			continue // the edge load (chain_edges.go): judged at the end
		}
		// The workload itself: each class exactly where it is meant to be
		// (a commit's record counts as the bound counts an update: 4 MB
		// exactly is checked in transactional mode only).
		switch k := limKindOf(tag); {
		case k <= limWrites100 && n != ddblimit.TransactItems-1+int(k-limWrites98),
			k >= limItemUnder && k <= limItemOver && biggest != ddblimit.ItemBytes-1+int(k-limItemUnder),
			k == limTxAt && (tag[0] == 'w' || in.TransactItems[0].Update != nil) && bytes != ddblimit.TransactBytes:
			c.violate("limits: sim: %s's request for %s (%s) has %d actions, %d bytes, a put of %d: the workload is off the limit", p.id, tag, k, n, bytes, biggest)
		}
	}
}

// limWait holds a relay until the reads load is written; false when ctx
// ended first.
func (c *chain) limWait(ctx context.Context) bool {
	return waitUntil(ctx, func() bool { return !c.lim.on || c.lim.reads.Load() })
}

// limDrained are the groups the Lambda relay's drains may name besides the
// chain's own: the reads load's big ones.
func (c *chain) limDrained() []string {
	var pks []string
	if c.lim.big {
		for g := range chainLimReadBig {
			pks = append(pks, fmt.Sprintf("%s#r%d", c.urls[chainLimQueue], g))
		}
	}
	return pks
}

// limLedger is the first stage's ledger, whose commits of the "L<k>"
// accounts' deposits it fills to limit class k.
type limLedger struct {
	*builtin.Ledger
	c *chain
}

func (l limLedger) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	out, err := l.Ledger.Apply(ctx, in)
	tag := in.Message.Group
	if err != nil || !strings.HasPrefix(tag, "L") {
		return out, err
	}
	// The outbox items the commit adds for the confirmation, as the
	// product will prepare them (a read: the group's head).
	msgs := make([]outbox.Message, len(out.Send))
	for i, m := range out.Send {
		msgs[i] = outbox.Message{QueueURL: m.QueueURL, TopicARN: m.TopicARN, Group: m.Group, Body: m.Body, Attributes: m.Attributes, ID: m.ID}
	}
	b, err := outbox.New(l.c.db, chainOutbox, l.c.outboxClock()...).Prepare(ctx, msgs)
	if err != nil {
		return effect.Output{}, err
	}
	record := ddblimit.ItemSize(map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: in.Key}})
	out.Writes = limFill(limKindOf(tag), chainBusiness, func(i int) string { return limTagPK(tag, i) }, out.Writes,
		1+len(b.Items), record+ddblimit.TransactionBytes(b.Items))
	l.c.stat("limits: worker commit filled ("+limKindOf(tag).String()+")", 1)
	return out, nil
}

func (c *chain) ledger(table, confirm string) effect.Effect {
	l := &builtin.Ledger{Table: table, Confirm: confirm}
	if c.lim.on && confirm != "" {
		return limLedger{Ledger: l, c: c}
	}
	if c.topic.on && confirm == "" && table != chainLedger1 {
		return topicLedger{Ledger: l, c: c, queue: map[string]string{chainLedger2: chainConfirm, chainLedger3: chainConfirmEnv}[table]}
	}
	return l
}

// relayPerGroup is the chain relays' PerGroup: 4 in a limit seed, so
// that a group read alone asks for 5 items and a page of big messages is
// cut at 1 MB before its Limit; 3 otherwise.
func (c *chain) relayPerGroup() int {
	if c.lim.on {
		return 4
	}
	return 3
}

// outboxClock is the clock of the outboxes whose writes the limit
// workload sizes: in a limit seed, a fixed instant. An outbox item carries
// its time in milliseconds, a number DynamoDB sizes by its significant
// digits, so a clock that moved between the workload's count and the
// product's request would move a transaction "at" 4 MB by a byte.
func (c *chain) outboxClock() []outbox.Option {
	if !c.lim.on {
		return nil
	}
	return []outbox.Option{outbox.WithClock(func() time.Time { return time.UnixMilli(chainLimEpochMs) })}
}

// chainLimEpochMs is the limit seeds' outbox time: a millisecond with no
// trailing zero.
const chainLimEpochMs = 946_684_812_345

// limDeposit is the deposit of limit account L<k>.
func limDeposit(k limKind) string {
	return fmt.Sprintf(`{"account":"L%d","amount_cents":%d,"seq":1}`, k, 100+int(k))
}

// limit is the limiter: the reads load, the L accounts' deposits, then
// the producer's Writes at the limits. An incarnation starts again from the
// start: every Write carries a put conditioned on its absence, which tells
// a retry that an earlier attempt committed.
func (c *chain) limit(ctx context.Context, p *cproc) {
	// Write's retries draw their backoff from the seed: the runtime's
	// jitter would move the limiter's next call (a replay diverged there).
	ob := outbox.New(&cDynamo{p: p, inner: c.db}, chainOutbox, append(c.outboxClock(), outbox.WithRand(seededRand(c.cfg.Seed, p.id)))...)
	raw := outbox.New(c.db, chainOutbox, c.outboxClock()...)
	for g := range chainLimReadGroups {
		var msgs []outbox.Message
		for i := range chainLimReadMsgs {
			msgs = append(msgs, outbox.Message{QueueURL: c.urls[chainLimQueue], Group: fmt.Sprint("r", g), Body: c.limReadBody(g, i), ID: fmt.Sprintf("clim-r%d-%d", g, i)})
		}
		marker := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(chainBusiness),
			Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint("clim#r", g)}}}}
		if !c.limWrite(ctx, p, ob, msgs, []ddbtypes.TransactWriteItem{marker}, fmt.Sprint("r", g), false) {
			return
		}
	}
	c.lim.reads.Store(true)
	for k := range numLimKinds {
		marker := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(chainBusiness),
			Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("dep-L%d-1", k)}}}}
		m := []outbox.Message{{QueueURL: c.urls[chainDeposit], Group: fmt.Sprint("L", int(k)), Body: limDeposit(k), ID: fmt.Sprintf("dep-L%d-1", k)}}
		if !c.limWrite(ctx, p, ob, m, []ddbtypes.TransactWriteItem{marker}, fmt.Sprint("L", int(k)), false) {
			return
		}
	}
	for k := range numLimKinds {
		tag := fmt.Sprint("w", int(k))
		m := []outbox.Message{{QueueURL: c.urls[chainLimQueue], Group: tag, Body: "limit " + tag, ID: "clim-" + tag}}
		b, err := raw.Prepare(ctx, m)
		if err != nil {
			c.violate("limits: prepare %s: %v", tag, err)
			return
		}
		writes := limFill(k, chainBusiness, func(i int) string { return limTagPK(tag, i) }, nil, len(b.Items), ddblimit.TransactionBytes(b.Items))
		if !c.limWrite(ctx, p, ob, m, writes, tag, (&limSpec{kind: k}).dead()) {
			return
		}
	}
	if !c.limitEdges(ctx, p, ob) {
		return
	}
	c.lim.written.Store(true)
	<-ctx.Done()
}

// limReadBody is message i of the reads load's group g: small, or within
// 320 bytes of SQS's limit with the relay's key in the big groups.
func (c *chain) limReadBody(g, i int) string {
	tag := fmt.Sprintf("r%d-%d:", g, i)
	if !c.lim.big || g >= chainLimReadBig {
		return tag
	}
	n := outbox.MaxBodyBytes - 64 - int(hash64(c.cfg.Seed, "chain limits body", tag)%256)
	return tag + strings.Repeat("x", n-len(tag))
}

// limWrite writes msgs with writes (the first conditioned on its item's
// absence) until Write answers for good: committed (now or by an earlier
// attempt), or refused as ErrInvalid, which it must be when dead. It
// reports false when the incarnation ended first.
func (c *chain) limWrite(ctx context.Context, p *cproc, ob *outbox.Outbox, msgs []outbox.Message, writes []ddbtypes.TransactWriteItem, tag string, dead bool) bool {
	switch w := writes[0]; {
	case w.Put != nil:
		w.Put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	case w.Update != nil:
		w.Update.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	label := ""
	switch tag[0] {
	case 'w':
		label = limKindOf(tag).String()
	case 'e':
		label = chainEdges()[limKindOf(tag)].why
	}
	what := tag
	if label != "" {
		what += " (" + label + ")"
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || p.dead.Load() {
			return false
		}
		err := ob.Write(ctx, msgs, writes...)
		var tce *ddbtypes.TransactionCanceledException
		switch {
		case err == nil || errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed":
			if dead {
				c.violate("limits: the producer's Write of %s, past a limit, committed", what)
			}
			return true
		case errors.Is(err, outbox.ErrInvalid):
			if !dead {
				c.violate("limits: the producer's Write of %s, within the limits, refused: %v", what, err)
			} else {
				c.stat("limits: the producer's Write refused ("+label+")", 1)
			}
			return true
		}
		c.stat("limits: the producer's Write retried", 1)
		time.Sleep(time.Second << min(attempt, 4))
	}
}

// drainQueue receives and deletes every message of queue, in order per
// group.
func (c *chain) drainQueue(ctx context.Context, queue string) []types.Message {
	var all []types.Message
	for {
		out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.urls[queue]), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			c.violate("read %s: %v", queue, err)
			return all
		}
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			all = append(all, m)
			_, _ = c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.urls[queue]), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// byGroup is what a drained queue holds per group, in order, each message
// once (a copy published again carries the first's key).
func byGroup(ms []types.Message) map[string][]string {
	got := map[string][]string{}
	seen := map[string]bool{}
	for _, m := range ms {
		key := aws.ToString(m.MessageAttributes[outbox.IdempotencyKeyAttribute].StringValue)
		if seen[key] {
			continue
		}
		seen[key] = true
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		got[g] = append(got[g], aws.ToString(m.Body))
	}
	return got
}

// limDeadLetters takes the L accounts' deposits that must be in the first
// DLQ out of its bodies, and says which are missing.
func (c *chain) limDeadLetters(bodies []string) []string {
	if !c.lim.on {
		return bodies
	}
	var rest []string
	found := map[limKind]bool{}
	for _, b := range bodies {
		k, ok := limKind(0), false
		for j := range numLimKinds {
			if b == limDeposit(j) && (&limSpec{kind: j}).dead() {
				k, ok = j, true
			}
		}
		if !ok {
			rest = append(rest, b)
			continue
		}
		found[k] = true
	}
	for k := range numLimKinds {
		if (&limSpec{kind: k}).dead() && !found[k] {
			c.violate("limits: deposit L%d (%s) past a DynamoDB limit is not in %s", k, k, chainDLQ1)
		}
	}
	return rest
}

// checkLimits verifies the limit workload's outcome.
func (c *chain) checkLimits(ctx context.Context) {
	if !c.lim.on {
		return
	}
	drained := c.drainQueue(ctx, chainLimQueue)
	got := byGroup(drained)
	for g := range chainLimReadGroups {
		group := fmt.Sprint("r", g)
		var want []string
		for i := range chainLimReadMsgs {
			want = append(want, c.limReadBody(g, i))
		}
		if fmt.Sprint(got[group]) != fmt.Sprint(want) {
			c.violate("limits: reads group %s: %d messages reached the queue, want %d in order", group, len(got[group]), len(want))
		}
		c.checkPublished(ctx, chainLimQueue, group, chainLimReadMsgs)
	}
	c.lim.mu.Lock()
	reqs := maps.Clone(c.lim.reqs)
	c.lim.mu.Unlock()
	c.checkEdges(ctx, drained, reqs)
	for k := range numLimKinds {
		dead := (&limSpec{kind: k}).dead()
		c.stat(fmt.Sprintf("limits: chain checked (%s)", k), 1)
		// The producer's Write.
		tag := fmt.Sprint("w", int(k))
		marker := c.get(ctx, chainBusiness, limTagPK(tag, 0)) != nil
		switch {
		case dead && (marker || len(got[tag]) > 0):
			c.violate("limits: the producer's Write of %s (%s) is past a limit, and its write exists (%v) or %d messages were published", tag, k, marker, len(got[tag]))
		case !dead && (!marker || fmt.Sprint(got[tag]) != fmt.Sprint([]string{"limit " + tag})):
			c.violate("limits: the producer's Write of %s (%s) committed: its write exists %v, its message published %q", tag, k, marker, got[tag])
		case k.over() && reqs[tag] > 0:
			c.violate("limits: the producer's Write of %s (%s) is over a limit, and %d TransactWriteItems carried it: Write must refuse it before any request", tag, k, reqs[tag])
		}
		if dead {
			c.checkPublished(ctx, chainLimQueue, tag, 0)
		} else {
			c.checkPublished(ctx, chainLimQueue, tag, 1)
		}
		// The worker's commit of deposit L<k>.
		tag = fmt.Sprint("L", int(k))
		marker = c.get(ctx, chainBusiness, limTagPK(tag, 0)) != nil
		for _, ledger := range c.ledgers() {
			it := c.get(ctx, ledger, "acct#"+tag)
			switch {
			case dead && it != nil:
				c.violate("limits: %s: deposit %s (%s) is past a limit, and it was applied", ledger, tag, k)
			case !dead && (it == nil || num(it["balance_cents"]) != int64(100+int(k)) || num(it["applied"]) != 1):
				c.violate("limits: %s: deposit %s (%s) not applied once (%v)", ledger, tag, k, it)
			}
		}
		switch {
		case dead == marker:
			c.violate("limits: deposit %s (%s): its commit's first write exists: %v", tag, k, marker)
		case k.over() && reqs[tag] > 0:
			c.violate("limits: deposit %s (%s) is over a limit, and %d TransactWriteItems carried its writes: the product must refuse it before any request", tag, k, reqs[tag])
		}
		if k == limTxAt && reqs[tag] > 0 {
			c.stat("limits: a 4 MB commit sent (refused by DynamoDB)", 1)
		}
		if dead {
			c.checkPublished(ctx, chainConfirmDest, tag, 0)
		} else {
			c.checkPublished(ctx, chainConfirmDest, tag, 1)
		}
	}
}

// checkPublished: the outbox holds n messages of group on queue, each
// published as it is.
func (c *chain) checkPublished(ctx context.Context, queue, group string, n int) {
	items, err := outbox.ListGroup(ctx, c.db, chainOutbox, c.urls[queue], group, 10)
	if err != nil {
		c.violate("outbox: %v", err)
		return
	}
	if len(items) != n {
		c.violate("limits: outbox group %s of %s holds %d messages, want %d", group, queue, len(items), n)
	}
	for _, it := range items {
		if it.Failed != "" || it.Dropped != "" || it.Held != "" || it.SentAt.IsZero() {
			c.violate("limits: %s not published as it is (failed %q, dropped %q, held %q)", it.ID, it.Failed, it.Dropped, it.Held)
		}
	}
}
