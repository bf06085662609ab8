package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/outbox"
)

// The topic worlds (issue 35): in half of the chain seeds the first
// stage's confirmations go to an SNS FIFO topic (internal/memsns) instead
// of the confirmations queue. Two queues are subscribed to it:
// confirmations.fifo with raw message delivery on and
// confirmations-envelope.fifo with it off (the body is SNS's JSON
// envelope), each consumed by its own workers into its own ledger, under
// the chain's faults. The relays publish with PublishBatch, which gets the
// fault kinds of SQS's batch calls (fail, timeout, lost answer, partial
// failure, ...). In half of the topic worlds one PublishBatch of a relay
// stalls for chainZombieStall before it is made, as a zombie relay's would:
// past SNS's and SQS's five-minute deduplication windows, so that the
// topic delivers again what another relay published meanwhile and only the
// consumers' dedup keys (the publisher's idempotency-key) keep each
// confirmation applied once.
//
// Judged by checkTopic and at each delivery (topicLedger): each subscriber
// applies each confirmation once, in its account's order (the ledgers'
// seq conditions turn a second application or a reordering into a dead
// letter, which judgeDeadLetter reports); nothing delivered that was not
// written; the message group is the account's; the envelope's facts reach
// the effect; both subscribers' ledgers agree at the end.
const (
	chainTopicName   = "confirmations-topic.fifo"
	chainConfirmEnv  = "confirmations-envelope.fifo"
	chainDLQ3        = "confirmations-envelope-dlq.fifo"
	chainLedger3     = "ledger-confirmed-envelope"
	chainConfirmDest = "confirm-dest" // key of c.urls: the confirmations' destination (queue URL or topic ARN)
	chainZombieStall = 6 * time.Minute
)

type chainTopic struct {
	on, zombie bool
	zombieAt   int64 // the zombie's PublishBatch: the zombieAt-th of the run
	arn        string
	sns        *memsns.Server
	calls      atomic.Int64
	stalling   atomic.Bool // the zombie is stalled: the chain is not settled
}

func newChainTopic(seed uint64) *chainTopic {
	x := hash64(seed, "chain topic")
	on := x%2 == 0
	return &chainTopic{on: on, zombie: on && (x>>8)%2 == 0, zombieAt: 1 + int64(x>>16)%12}
}

// topicQueues are the queues a topic world adds (DLQ first).
func (c *chain) topicQueues() []string {
	return map[bool][]string{true: {chainDLQ3, chainConfirmEnv}}[c.topic.on]
}

// topicDLQs are the source queues and their DLQs, in the order the tail
// redrives.
func (c *chain) dlqs() [][2]string {
	if c.topic.on {
		return append(chainDLQs[:len(chainDLQs):len(chainDLQs)], [2]string{chainConfirmEnv, chainDLQ3})
	}
	return chainDLQs
}

// setUpTopic makes the topic and its two subscriptions in a topic world;
// otherwise the confirmations go to their queue.
func (c *chain) setUpTopic(ctx context.Context) error {
	c.urls[chainConfirmDest] = c.urls[chainConfirm]
	if !c.topic.on {
		return nil
	}
	c.stat("topic: worlds", 1)
	// Deliveries go to the fake SQS itself: SNS retries a queue for days.
	c.topic.sns = memsns.New(c.sqs, memsns.WithIDs(rand.NewPCG(c.cfg.Seed, 0x5175)))
	out, err := c.topic.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(chainTopicName),
		Attributes: map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "false"}})
	if err != nil {
		return err
	}
	c.topic.arn = aws.ToString(out.TopicArn)
	c.urls[chainConfirmDest] = c.topic.arn
	// In a fixed order (not a map's): SNS delivers to its subscriptions in
	// the order they were made, and a replay must see the same.
	for _, sub := range []struct {
		q   string
		raw bool
	}{{chainConfirm, true}, {chainConfirmEnv, false}} {
		q, raw := sub.q, sub.raw
		a, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(c.urls[q]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return err
		}
		if _, err := c.topic.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: out.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(a.Attributes["QueueArn"]),
			Attributes: map[string]string{"RawMessageDelivery": strconv.FormatBool(raw)}}); err != nil {
			return err
		}
	}
	if c.topic.zombie {
		c.stat("topic: worlds with a zombie relay", 1)
	}
	return nil
}

// subscriptions declares queue's subscription to the topic, in a topic world.
func (c *chain) subscriptions(queue string) []exactly.Subscription {
	if !c.topic.on || queue != chainConfirm && queue != chainConfirmEnv {
		return nil
	}
	return []exactly.Subscription{{Queue: c.urls[queue], Topic: c.topic.arn, Raw: queue == chainConfirm}}
}

// relaySNS is a relay's SNS client, in a topic world.
func (c *chain) relaySNS(p *cproc) outbox.SNS {
	if !c.topic.on {
		return nil
	}
	return &cSNS{p: p, inner: c.topic.sns}
}

// cSNS is a process's SNS client: PublishBatch through the injector.
type cSNS struct {
	p     *cproc
	inner *memsns.Server
}

func (c *cSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opt ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	t := c.p.c.topic
	if n := t.calls.Add(1); t.zombie && n == t.zombieAt && !c.p.c.inj.healed.Load() {
		// A zombie: it read the outbox, and publishes what it read
		// after the deduplication windows, whatever its context says.
		t.stalling.Store(true)
		c.p.c.stat("topic: zombie relay stalled", 1)
		time.Sleep(chainZombieStall)
		t.stalling.Store(false)
	}
	subject := chainTopicName
	if len(in.PublishBatchRequestEntries) > 0 {
		subject += "|" + aws.ToString(in.PublishBatchRequestEntries[0].MessageDeduplicationId)
	}
	k, id, err := c.p.before(ctx, "PublishBatch", subject)
	if err != nil {
		return nil, err
	}
	var keep []snstypes.PublishBatchRequestEntry
	var fails []snstypes.BatchResultErrorEntry
	for _, e := range in.PublishBatchRequestEntries {
		if k == Partial && c.p.c.inj.entryFails(id, aws.ToString(e.Id)) {
			fails = append(fails, snstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("sim: entry failed"), SenderFault: false})
			continue
		}
		keep = append(keep, e)
	}
	out := &sns.PublishBatchOutput{}
	if len(keep) > 0 {
		call := *in
		call.PublishBatchRequestEntries = keep
		if out, err = c.inner.PublishBatch(ctx, &call, opt...); err != nil {
			return nil, err
		}
	}
	if len(fails) > 0 {
		c.p.stat("topic: PublishBatch entries failed", len(fails))
	}
	out.Failed = append(out.Failed, fails...)
	if err := c.p.after(ctx, "PublishBatch", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

// topicLedger is a subscriber's ledger effect: it judges each delivery
// before it applies it.
type topicLedger struct {
	*builtin.Ledger
	c     *chain
	queue string
}

func (l topicLedger) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	l.c.judgeDelivery(l.queue, in)
	return l.Ledger.Apply(ctx, in)
}

// judgeDelivery: the message is a confirmation the first stage wrote (its
// body one of a deposit's), in its account's group, from the topic, with
// the envelope's facts when raw delivery is off.
func (c *chain) judgeDelivery(queue string, in effect.Input) {
	m := in.Message
	var conf struct {
		Account     string `json:"account"`
		AmountCents int64  `json:"amount_cents"`
		Seq         int64  `json:"seq"`
		Confirms    string `json:"confirms"`
	}
	if err := json.Unmarshal([]byte(m.Body), &conf); err != nil || conf.Confirms == "" {
		c.violate("topic: %s delivered %.80q, not a confirmation the first stage wrote (%v)", queue, m.Body, err)
		return
	}
	var acct int
	switch _, err := fmt.Sscanf(conf.Account, "a%d", &acct); {
	case strings.HasPrefix(conf.Account, "L"):
	case err != nil || acct < 0 || acct >= chainAccounts || conf.Seq < 1 || conf.Seq > chainDeposits || conf.AmountCents != amount(acct, int(conf.Seq)):
		c.violate("topic: %s delivered %s, which no deposit confirms", queue, m.Body)
	}
	if m.Group != conf.Account {
		c.violate("topic: %s delivered %s in group %q, want its account's %q (the group carried through)", queue, m.Body, m.Group, conf.Account)
	}
	n := m.Notification
	switch {
	case n == nil || n.TopicARN != c.topic.arn:
		c.violate("topic: %s delivered %s without its topic (%+v)", queue, m.Body, n)
	case queue == chainConfirmEnv && (n.MessageID == "" || n.SequenceNumber == ""):
		c.violate("topic: %s delivered %s without the envelope's message id and sequence number (%+v)", queue, m.Body, n)
	}
}

// checkTopic: both subscribers' ledgers hold the same accounts, equal.
func (c *chain) checkTopic(ctx context.Context) {
	if !c.topic.on {
		return
	}
	accts := []string{}
	for acct := range chainAccounts {
		accts = append(accts, fmt.Sprint("a", acct))
	}
	if c.lim.on {
		for k := range numLimKinds {
			accts = append(accts, fmt.Sprint("L", int(k)))
		}
	}
	for _, a := range accts {
		raw, env := c.get(ctx, chainLedger2, "acct#"+a), c.get(ctx, chainLedger3, "acct#"+a)
		for _, f := range []string{"balance_cents", "applied", "last_seq"} {
			if (raw == nil) != (env == nil) || raw != nil && num(raw[f]) != num(env[f]) {
				c.violate("topic: account %s: %s %v on the raw subscriber, %v on the envelope one", a, f, raw[f], env[f])
				break
			}
		}
	}
}

// ledgers are the chain's ledgers: the first stage's and each subscriber's.
func (c *chain) ledgers() []string {
	if c.topic.on {
		return []string{chainLedger1, chainLedger2, chainLedger3}
	}
	return []string{chainLedger1, chainLedger2}
}
