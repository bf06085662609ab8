package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"log/slog"
	"math/rand/v2"
	"sort"
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

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/outbox"
)

// The chain: the producer half and the consumer half together, end to end.
//
// A producer commits each deposit (a business item) and its message in one
// outbox transaction. Relays (two at once, crashing and restarting, paused
// into zombies) publish the outbox to the deposits queue. Workers apply each
// deposit to a first ledger exactly once and, in the same transaction,
// write its confirmation to the outbox; the relays publish that to the
// confirmations queue, whose workers apply it to a second ledger. Every call
// of every process goes through the seeded fault injector.
//
// The invariant is end to end: every deposit is in the business table once,
// applied to the first ledger once and confirmed into the second once, in
// each account's order (the ledgers' seq conditions turn any reordering
// into a permanent failure, which would leave a dead letter and a missing
// application); nothing is left pending in the outbox or the queues.
const (
	chainAccounts = 4
	chainDeposits = 6
	chainDeposit  = "deposits.fifo"
	chainConfirm  = "confirmations.fifo"
	chainDLQ1     = "deposits-dlq.fifo"
	chainDLQ2     = "confirmations-dlq.fifo"
	chainDedup    = "chain-dedup"
	chainBusiness = "business"
	chainLedger1  = "ledger-deposits"
	chainLedger2  = "ledger-confirmed"
	chainOutbox   = "outbox"
	chainRelays   = 2
	chainWorkers  = 2 // per queue

	// The sizes workload: messages at SQS's limits on a queue of their
	// own (no consumer; check reads it), whose MaximumMessageSize an
	// operator lowers under them and raises again.
	chainSizes      = "sizes.fifo"
	chainSizeGroups = 6 // their big messages pass 1 MiB together: batches must be cut
	chainSizeLow    = 64 * 1024
	chainSizeHigh   = 256 * 1024
)

type chain struct {
	cfg  Config
	inj  *Injector
	sqs  *memsqs.Server
	db   *memdynamo.DB
	urls map[string]string
	wg   sync.WaitGroup

	produced atomic.Bool
	sized    atomic.Bool  // the sizes workload is written
	reads    atomic.Int64 // reads of outbox items (staleMarks)

	start time.Time

	mu         sync.Mutex
	violations []string
	stats      map[string]int
	logs       []string        // with Config.Logs (chain_log.go)
	healedAt   time.Duration   // when the tail began (chain_tail.go)
	deadSeen   map[string]bool // dead letters judged (judgeDeadLetter)

	seq   *sequencer  // sequencer.go: nil when off
	lim   *chainLims  // chain_limits.go
	cmb   *chainCmb   // chain_combine.go
	topic *chainTopic // chain_topic.go
}

// RunChain runs the chain once. It must be called inside a synctest bubble.
func RunChain(cfg Config) Result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &chain{cfg: cfg, inj: newInjector(cfg.Seed, cfg.Rate, cfg.Kinds, cfg.Ops, cfg.Only),
		db: memdynamo.New(), urls: map[string]string{}, stats: map[string]int{}, seq: newSequencer(cfg), lim: newChainLims(cfg.Seed), cmb: newChainCmb(cfg.Seed), topic: newChainTopic(cfg.Seed)}
	// Message ids and receipt handles from the seed, as the world's.
	c.sqs = memsqs.New(memsqs.WithIDs(rand.NewPCG(cfg.Seed, 0x5e95)), memsqs.WithWake(c.seq.woke))
	start := time.Now()
	c.start = start
	if err := c.setUp(ctx); err != nil {
		return Result{Violations: []string{"set-up: " + err.Error()}}
	}
	pctx, stop := context.WithCancel(ctx)
	for slot := range chainRelays {
		c.loop(pctx, fmt.Sprint("relay", slot), c.runRelay)
	}
	for slot := range chainWorkers {
		c.loop(pctx, fmt.Sprint("w1.", slot), func(ctx context.Context, p *cproc) {
			c.runWorker(ctx, p, chainDeposit, chainDLQ1, chainLedger1, c.urls[chainConfirmDest])
		})
		c.loop(pctx, fmt.Sprint("w2.", slot), func(ctx context.Context, p *cproc) { c.runWorker(ctx, p, chainConfirm, chainDLQ2, chainLedger2, "") })
		if c.topic.on {
			c.loop(pctx, fmt.Sprint("w3.", slot), func(ctx context.Context, p *cproc) { c.runWorker(ctx, p, chainConfirmEnv, chainDLQ3, chainLedger3, "") })
		}
	}
	c.loop(pctx, "producer", c.produce)
	c.loop(pctx, "sizer", c.produceSizes)
	if c.lim.on {
		c.loop(pctx, "limiter", c.limit)
	}
	if c.cmb.on {
		c.cmbLoop(pctx)
	}
	c.wg.Go(func() { c.operate(pctx) })
	// The fault phase, then the healed tail (chain_tail.go); liveness is
	// judged after it.
	c.faultPhase(ctx)
	healed := c.heal(ctx)
	stop()
	c.wg.Wait()
	if healed {
		c.check(ctx)
		c.checkClaims(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.inj.counts {
		c.stats["fault: "+k.String()] += n
	}
	res := Result{Violations: c.violations, Faults: c.inj.Injected(), Stats: c.stats, Virtual: time.Since(start), Logs: c.logs}
	if c.seq != nil && c.seq.logOn {
		c.seq.mu.Lock()
		res.Steps = c.seq.log
		c.seq.mu.Unlock()
	}
	res.Record, res.Diverged = c.seq.record()
	return res
}

func (c *chain) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *chain) stat(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats[name] += n
}

func (c *chain) setUp(ctx context.Context) error {
	// The DLQs first: the worker queues' redrive policies name them, and
	// exactly.New finds a queue's DLQ there (maxReceiveCount 1000, SQS's
	// most: the workers' own moves, not the policy, dead-letter).
	names := []string{chainDLQ1, chainDLQ2, chainDeposit, chainConfirm, chainSizes}
	names = append(names, c.topicQueues()...)
	if c.lim.on {
		names = append(names, chainLimQueue)
	}
	names = append(names, c.cmbQueues()...)
	for _, name := range names {
		attrs := map[string]string{
			"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(int(visibility / time.Second)),
			// The operator has lowered the sizes queue's limit before
			// its messages come (operate raises it again).
			"MaximumMessageSize": strconv.Itoa(map[bool]int{true: chainSizeLow, false: chainSizeHigh}[name == chainSizes]),
		}
		if dlq := map[string]string{chainDeposit: chainDLQ1, chainConfirm: chainDLQ2, chainConfirmEnv: chainDLQ3}[name]; dlq != "" {
			a, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.urls[dlq]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			if err != nil {
				return err
			}
			attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"` + a.Attributes["QueueArn"] + `","maxReceiveCount":"1000"}`
		}
		out, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return err
		}
		c.urls[name] = aws.ToString(out.QueueUrl)
	}
	if err := c.setUpTopic(ctx); err != nil {
		return err
	}
	if _, err := c.db.CreateTable(ctx, outboxschema.CreateTableInput(chainOutbox)); err != nil {
		return err
	}
	for _, name := range []string{chainDedup, chainBusiness, chainLedger1, chainLedger2, chainLedger3} {
		if _, err := c.db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		}); err != nil {
			return err
		}
	}
	// TTL on the dedup table, as exactly.New's start-up check wants it.
	_, err := c.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(chainDedup),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)}})
	return err
}

// loop runs incarnations of one process slot: when one dies, the next
// starts after a while, with nothing of the old one's state.
func (c *chain) loop(ctx context.Context, slot string, run func(ctx context.Context, p *cproc)) {
	c.wg.Go(func() {
		for inc := 0; ctx.Err() == nil; inc++ {
			p := &cproc{id: fmt.Sprintf("%s.%d", slot, inc), c: c}
			pctx, cancel := context.WithCancel(ctx)
			p.kill = cancel
			run(pctx, p)
			cancel()
			if ctx.Err() != nil || !p.dead.Load() {
				return
			}
			c.stat("chain: restarts of "+slot[:len(slot)-1], 1)
			t := time.NewTimer(5*time.Second + time.Duration(hash64(c.cfg.Seed, "restart", p.id)%uint64(20*time.Second)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
				return
			}
		}
	})
}

func amount(acct, seq int) int64 { return int64(100*seq + acct) }

// produce commits the deposits, each account's in seq order, each with its
// message, retrying a deposit until it is known committed: committed now,
// or found committed by an earlier attempt (the business item's condition).
// An incarnation starts from the first deposit again (it knows nothing).
func (c *chain) produce(ctx context.Context, p *cproc) {
	ob := outbox.New(&cDynamo{p: p, inner: c.db}, chainOutbox, outbox.WithRand(seededRand(c.cfg.Seed, p.id)))
	for seq := 1; seq <= chainDeposits; seq++ {
		for acct := range chainAccounts {
			id := fmt.Sprintf("dep-a%d-%d", acct, seq)
			body := fmt.Sprintf(`{"account":"a%d","amount_cents":%d,"seq":%d}`, acct, amount(acct, seq), seq)
			business := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
				TableName: aws.String(chainBusiness),
				Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: id},
					"amount_cents": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(amount(acct, seq), 10)}},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}}
			for attempt := 0; ; attempt++ {
				if ctx.Err() != nil || p.dead.Load() {
					return
				}
				err := ob.Write(ctx, []outbox.Message{{QueueURL: c.urls[chainDeposit], Group: fmt.Sprint("a", acct), Body: body, ID: id}}, business)
				var tce *ddbtypes.TransactionCanceledException
				if err == nil {
					break
				}
				if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
					c.stat("producer: deposit found committed by an earlier attempt", 1)
					break
				}
				c.stat("producer: write retried", 1)
				time.Sleep(time.Second << min(attempt, 4))
			}
		}
	}
	c.produced.Store(true)
	<-ctx.Done()
}

// runRelay runs a relay incarnation: slot 0 as `worker relay` does (Run:
// sweeps of the pending index), slot 1 as the stream Lambda does (Drain of
// the groups "records" name, every few seconds, and a sweep every minute).
func (c *chain) runRelay(ctx context.Context, p *cproc) {
	r := &outbox.Relay{DB: &cDynamo{p: p, inner: c.db}, SQS: &cSQS{p: p, inner: c.sqs}, SNS: c.relaySNS(p), Table: chainOutbox,
		PerGroup: c.relayPerGroup(), Poll: time.Second, Concurrency: 2, Rand: seededRand(c.cfg.Seed, p.id), Logger: c.log(p),
		OnRound: func(r outbox.Round) {
			c.stat("relay: published", r.Published)
			c.stat("relay: duplicates known", r.Duplicates)
			c.stat("relay: groups left after an error", r.Errors)
			if r.Failed > 0 {
				c.violate("relay %s: %d messages refused for good", p.id, r.Failed)
			}
		}}
	if !c.limWait(ctx) {
		return
	}
	if p.id[len("relay")] == '0' {
		_ = r.Run(ctx)
		return
	}
	var pks []string
	for _, q := range []string{chainDeposit, chainConfirmDest} {
		for acct := range chainAccounts {
			pks = append(pks, fmt.Sprintf("%s#a%d", c.urls[q], acct))
		}
	}
	pks = append(pks, c.limDrained()...)
	for i := 0; ctx.Err() == nil; i++ {
		if i%20 == 0 {
			_, _ = r.Sweep(ctx)
			c.stat("relay: lambda sweeps", 1)
		} else {
			// A batch of records names some groups: a seeded half.
			var named []string
			for _, pk := range pks {
				if hash64(c.cfg.Seed, "stream", p.id, strconv.Itoa(i), pk)%2 == 0 {
					named = append(named, pk)
				}
			}
			_, _ = r.Drain(ctx, named)
			c.stat("relay: lambda drains", 1)
		}
		t := time.NewTimer(3 * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
			return
		}
	}
}

// runWorker runs a worker incarnation as the worker command does: an
// exactly.Worker built by exactly.New (its start-up calls faulted too; a
// start-up that fails ends the incarnation), the ledger effect committed
// optimistically or in transactional mode by incarnation, its
// confirmations through the outbox. A process that dies is stopped at once
// (StopAndCancel); its calls fail from then on.
func (c *chain) runWorker(ctx context.Context, p *cproc, queue, dlq, ledger, confirm string) {
	_ = dlq // the queue's redrive policy names it: exactly.New reads it there
	dy := &cDynamo{p: p, inner: c.db}
	cfg := exactly.Config{
		SQS: &cSQS{p: p, inner: c.sqs}, DynamoDB: dy, Queues: []string{c.urls[queue]}, Table: chainDedup,
		Effect: c.ledger(ledger, confirm), Commit: exactly.CommitTransactional, Subscriptions: c.subscriptions(queue),
		Namespace: "chain", TTL: ttl, Concurrency: 4, Receivers: 1, RetryInPlace: 1,
		Outbox: outbox.New(dy, chainOutbox, c.outboxClock()...), Logger: slog.New(slog.DiscardHandler),
		Test: exactly.TestConfig{Rand: rand.NewPCG(c.cfg.Seed, hash64(c.cfg.Seed, "rand", p.id))},
	}
	if c.seq != nil {
		cfg.Test.Step = func(what string) { c.seq.step(p.id, "seam", what) }
	}
	if hash64(c.cfg.Seed, "optimistic", p.id)%2 == 0 {
		cfg.Commit = exactly.CommitOptimistic
		c.stat("chain: optimistic incarnations", 1)
	}
	wk, err := exactly.New(ctx, cfg)
	if err != nil {
		c.stat("chain: worker start-up failed", 1)
		p.dead.Store(true) // the process exits; the loop starts the next one
		return
	}
	stopped := make(chan struct{})
	go func() { //nolint:gosec // a dead process is stopped at once, whatever ctx says
		select {
		case <-ctx.Done():
			if p.dead.Load() {
				now, done := context.WithCancel(context.Background())
				done()
				_ = wk.StopAndCancel(now)
			}
		case <-stopped:
		}
	}()
	_ = wk.Run(ctx)
	close(stopped)
}

// settled: everything produced, nothing pending in the outbox, nothing in
// the source queues.
func (c *chain) settled(ctx context.Context) bool {
	if !c.produced.Load() || !c.sized.Load() || c.lim.on && !c.lim.written.Load() || !c.cmbDone() || c.topic.stalling.Load() {
		return false
	}
	pending, err := outbox.ListPending(ctx, c.db, chainOutbox, 1)
	if err != nil || len(pending) > 0 {
		return false
	}
	for _, qd := range c.dlqs() {
		q := qd[0]
		out, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.urls[q]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
		if err != nil {
			return false
		}
		for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
			if out.Attributes[a] != "0" {
				return false
			}
		}
	}
	return true
}

func (c *chain) get(ctx context.Context, table, pk string) map[string]ddbtypes.AttributeValue {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}})
	if err != nil {
		c.violate("read %s %s: %v", table, pk, err)
		return nil
	}
	return out.Item
}

// check verifies the end-to-end invariants.
func (c *chain) check(ctx context.Context) {
	for acct := range chainAccounts {
		var total int64
		for seq := 1; seq <= chainDeposits; seq++ {
			total += amount(acct, seq)
			id := fmt.Sprintf("dep-a%d-%d", acct, seq)
			if c.get(ctx, chainBusiness, id) == nil {
				c.violate("deposit %s: not in the business table", id)
			}
		}
		for _, ledger := range c.ledgers() {
			it := c.get(ctx, ledger, fmt.Sprintf("acct#a%d", acct))
			if it == nil {
				c.violate("%s: account a%d never credited", ledger, acct)
				continue
			}
			if got := num(it["balance_cents"]); got != total {
				c.violate("%s: account a%d balance %d, want %d (each deposit once)", ledger, acct, got, total)
			}
			if got := num(it["applied"]); got != chainDeposits {
				c.violate("%s: account a%d applied %d deposits, want %d", ledger, acct, got, chainDeposits)
			}
			if got := num(it["last_seq"]); got != chainDeposits {
				c.violate("%s: account a%d last seq %d, want %d", ledger, acct, got, chainDeposits)
			}
		}
		items, err := outbox.ListGroup(ctx, c.db, chainOutbox, c.urls[chainConfirmDest], fmt.Sprint("a", acct), 100)
		if err != nil {
			c.violate("outbox: %v", err)
		}
		if len(items) != chainDeposits {
			c.violate("outbox: account a%d has %d confirmations, want %d (one per deposit)", acct, len(items), chainDeposits)
		}
		for i, it := range items {
			if it.SentAt.IsZero() || it.Failed != "" {
				c.violate("outbox: confirmation %s not published (failed %q)", it.ID, it.Failed)
			}
			// Committed in the order the deposits were applied: seq order.
			if want := fmt.Sprintf(`"seq":%d`, i+1); !strings.Contains(it.Body, want) {
				c.violate("outbox: confirmation %d of a%d is %s, want seq %d", i+1, acct, it.Body, i+1)
			}
		}
	}
	c.checkSizes(ctx)
	c.checkLimits(ctx)
	c.checkCombined(ctx)
	c.checkTopic(ctx)
	for _, qd := range c.dlqs() {
		q := qd[1]
		var bodies []string
		for _, m := range c.drainQueue(ctx, q) {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		if q == chainDLQ1 {
			bodies = c.limDeadLetters(bodies)
		}
		sort.Strings(bodies)
		if len(bodies) > 0 {
			c.violate("end: %s holds %v after the tail's redrives", q, bodies)
		}
	}
}

// sizeBodies are group g's messages of the sizes workload, in order: small,
// exactly SQS's limit with the relay's key counted, one byte under, small.
// Write must refuse one more byte.
func sizeBodies(g int) (bodies []string, over string) {
	group := fmt.Sprint("s", g)
	tag := func(i int) string { return fmt.Sprintf("%s-%d:", group, i) }
	fits := outbox.MaxBodyBytes - len(outbox.IdempotencyKeyAttribute) - len("String") - len(outbox.Key(group, sizeID(g, 2)))
	pad := func(t string, n int) string { return t + strings.Repeat("x", n-len(t)) }
	return []string{tag(1), pad(tag(2), fits), pad(tag(3), fits-1), tag(4)}, pad(tag(0), fits+1)
}

func sizeID(g, i int) string { return fmt.Sprintf("size-s%d-%d", g, i) }

// produceSizes writes the sizes workload, each message once (a business
// item's condition tells a retry it committed), and checks that Write
// refuses a message one byte over the limit.
func (c *chain) produceSizes(ctx context.Context, p *cproc) {
	ob := outbox.New(&cDynamo{p: p, inner: c.db}, chainOutbox, outbox.WithRand(seededRand(c.cfg.Seed, p.id)))
	for i := range 4 {
		for g := range chainSizeGroups {
			bodies, over := sizeBodies(g)
			if i == 0 {
				err := ob.Write(ctx, []outbox.Message{{QueueURL: c.urls[chainSizes], Group: fmt.Sprint("s", g), Body: over, ID: sizeID(g, 2)}})
				if !errors.Is(err, outbox.ErrInvalid) {
					c.violate("sizes: Write took a message one byte over SQS's limit (err %v)", err)
				}
			}
			id := sizeID(g, i+1)
			business := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
				TableName: aws.String(chainBusiness), Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: id}},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}}
			for attempt := 0; ; attempt++ {
				if ctx.Err() != nil || p.dead.Load() {
					return
				}
				err := ob.Write(ctx, []outbox.Message{{QueueURL: c.urls[chainSizes], Group: fmt.Sprint("s", g), Body: bodies[i], ID: id}}, business)
				var tce *ddbtypes.TransactionCanceledException
				if err == nil || errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
					break
				}
				time.Sleep(time.Second << min(attempt, 4))
			}
		}
	}
	c.sized.Store(true)
	<-ctx.Done()
}

// operate is the operator: once the sizes workload is written and has
// waited a while, it raises the sizes queue's MaximumMessageSize again and
// releases every held group, as worker outbox release does.
func (c *chain) operate(ctx context.Context) {
	raised := false
	for ctx.Err() == nil {
		t := time.NewTimer(time.Minute)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
			return
		}
		if !c.sized.Load() {
			continue
		}
		if !raised {
			if _, err := c.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(c.urls[chainSizes]),
				Attributes: map[string]string{"MaximumMessageSize": strconv.Itoa(chainSizeHigh)}}); err != nil {
				c.violate("sizes: raise MaximumMessageSize: %v", err)
			}
			raised = true
		}
		for g := range chainSizeGroups {
			group := fmt.Sprint("s", g)
			it, h, held, err := outbox.HeldItem(ctx, c.db, chainOutbox, c.urls[chainSizes], group)
			if err != nil || !held {
				continue
			}
			c.stat("sizes: groups held, released by the operator", 1)
			if !strings.Contains(h.Why, "InvalidParameterValue") {
				c.violate("sizes: group %s held for %q, not its size", group, h.Why)
			}
			if err := outbox.Release(ctx, c.db, chainOutbox, c.urls[chainSizes], group, it.ID); err != nil {
				c.violate("sizes: release %s: %v", group, err)
			}
		}
	}
}

// checkSizes: every message of the sizes workload reached its queue, each
// group's in order (a copy published again may follow; its key tells),
// none marked failed or dropped: a held group was never passed.
func (c *chain) checkSizes(ctx context.Context) {
	got := byGroup(c.drainQueue(ctx, chainSizes))
	for g := range chainSizeGroups {
		group := fmt.Sprint("s", g)
		want, _ := sizeBodies(g)
		if len(got[group]) != len(want) {
			c.violate("sizes: group %s: %d messages reached the queue, want %d", group, len(got[group]), len(want))
			continue
		}
		for i := range want {
			if got[group][i] != want[i] {
				c.violate("sizes: group %s: message %d is %.12q, want %.12q (out of order or passed)", group, i+1, got[group][i], want[i])
			}
		}
		items, err := outbox.ListGroup(ctx, c.db, chainOutbox, c.urls[chainSizes], group, 10)
		if err != nil {
			c.violate("outbox: %v", err)
		}
		for _, it := range items {
			if it.Failed != "" || it.Dropped != "" || it.Held != "" || it.SentAt.IsZero() {
				c.violate("sizes: %s not published as it is (failed %q, dropped %q, held %q)", it.ID, it.Failed, it.Dropped, it.Held)
			}
		}
	}
}
