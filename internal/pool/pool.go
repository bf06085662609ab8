// Package pool receives messages from SQS queues and runs them through the
// exactly-once processor: per (queue, message group) strictly in order,
// different groups in parallel up to a concurrency limit, with visibility
// heartbeats, batched acknowledgements, backoff and graceful shutdown.
package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/jitter"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// Defaults.
const (
	DefaultWaitTime = 20 * time.Second
	// DefaultReceivers is the fewest concurrent long polls per queue;
	// ReceiversFor raises it with the concurrency.
	DefaultReceivers = 2
	// HandlersPerReceiver is how many handlers one receiver keeps busy:
	// it brings at most 10 messages per receive round trip (10-20 ms on
	// AWS), about what 8 handlers finish in that time when each makes a
	// DynamoDB transaction (about 12 ms).
	HandlersPerReceiver = 8
	// HandlersPerReceiverGroupCommit is HandlersPerReceiver for handlers
	// that give their slot back while their commit waits in a group
	// commit's transaction: each then finishes about twice the messages in a
	// receive's round trip. At AWS-like latency, one receiver per 4 of them
	// took group commit from 1.23× to 2.20× a hand-written consumer at
	// concurrency 16 and from 1.16× to 1.64× at 64 (same run).
	HandlersPerReceiverGroupCommit = 4
	DefaultConcurrency             = 32
	DefaultShutdownTimeout         = 90 * time.Second // inside ECS's 120 s stopTimeout
	// DefaultAckDelay: a delete or visibility change waits at most this
	// long for company before its batch goes out (at once when 10 are
	// waiting, or when the pool holds no other message of the queue). From
	// 200 messages/s per queue it fills batches of 10: 0.1 deletes per
	// message. A FIFO group whose previous message is finished waits at most
	// this long, plus one DeleteMessageBatch, before SQS may hand out its
	// next message.
	DefaultAckDelay  = 50 * time.Millisecond
	DefaultRetryBase = 1 * time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// ReceiversFor is the default number of receivers of a queue for a pool
// of conc handlers: one per HandlersPerReceiver of them (one per
// HandlersPerReceiverGroupCommit when the processor commits in groups),
// at least DefaultReceivers. With fewer, at SQS's latency the receives,
// not the handlers, bound the rate: two receivers cap a pool near 2×10
// messages per 15 ms round trip, about 1,300 msg/s, whatever its
// concurrency.
func ReceiversFor(conc int, groupCommit bool) int {
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	per := HandlersPerReceiver
	if groupCommit {
		per = HandlersPerReceiverGroupCommit
	}
	return max(DefaultReceivers, (conc+per-1)/per)
}

// MaxInFlightFor is the default MaxInFlight of a pool of conc handlers
// and receivers receivers in all: a receive's batch (10) for each of
// them. A FIFO receive brings up to 10 messages of one group, which run
// one after another in one lane; to keep conc lanes busy the pool holds
// about 10 messages per handler, as a hand-written consumer whose conc
// loops each receive 10 does. With 2×conc + 10 per receiver, a pool on a
// FIFO queue whose groups have many messages waiting ran about
// conc/5 + 2 groups at a time, each one transaction after another: at
// AWS-like latency 0.52× a hand-written consumer at concurrency 16 and
// 0.54× at 64. Lanes, not messages, bound what a standard queue holds
// (see Config.MaxInFlight).
func MaxInFlightFor(conc, receivers int) int {
	return maxBatch * (conc + receivers)
}

// Queue is one queue the pool consumes.
type Queue struct {
	URL        string
	FIFO       bool
	Visibility time.Duration // asked for at receive (the queue's VisibilityTimeout or an override); held messages are extended at about half of it
	Lease      time.Duration // dedup lease per claim; DefaultLease(Visibility) if 0
	Receivers  int           // concurrent long polls; ReceiversFor(Concurrency, false) if 0
	// DLQURL, when set, receives permanent failures directly (DeadLetterCopy:
	// group and dedup key kept, a dedup id of the copy's own); otherwise they
	// are left to the queue's redrive policy.
	DLQURL string
}

// DefaultLease is the dedup lease for a queue's visibility timeout: a little
// shorter, so that when a worker dies its lease has ended by the time SQS
// hands the message to someone else, who then claims it at once instead of
// finding the dead worker's lease still alive for a few milliseconds (busy,
// a wasted receive and a wait).
func DefaultLease(visibility time.Duration) time.Duration {
	margin := max(visibility/10, time.Second)
	return max(visibility-margin, visibility/2)
}

// Processor runs one message; *process.Processor satisfies it.
type Processor interface {
	Process(ctx context.Context, m effect.Message, h process.Hooks) process.Result
}

// Observer is told what happens, for metrics. All methods must be cheap and
// safe for concurrent use.
type Observer interface {
	Received(queue string, n int)
	Done(queue string, r process.Result, took time.Duration)
	ReceiveError(queue string, err error)
	// BatchFailed: n delete or hand-back (visibility change) entries
	// failed; op is "delete" or "change_visibility". The keeper's
	// extensions are not counted here (see ExtensionObserver).
	BatchFailed(queue, op string, n int)
	InFlight(delta int)
}

// ExtensionObserver is an optional interface of an Observer: it is told
// about the visibility keeper's failures.
type ExtensionObserver interface {
	// ExtensionFailed: n visibility extensions failed, as a whole call or
	// as entries (stale receipts included). Each is tried again soon
	// unless its receipt is stale; meanwhile the pool counts on the last
	// confirmed deadline only.
	ExtensionFailed(queue string, n int)
	// ReceiptStale: n held deliveries were lost because SQS refused their
	// receipt handle (ReceiptHandleIsInvalid, MessageNotInflight): the
	// worker no longer owns them. One waiting for its turn is not run; a
	// running one finishes (the ledger decides), but is not extended.
	ReceiptStale(queue string, n int)
}

// Config of a Pool.
type Config struct {
	Client      SQS
	Queues      []Queue
	Processor   Processor
	Concurrency int // handlers running at once; DefaultConcurrency if 0
	// MaxInFlight bounds the messages received and not yet finished;
	// MaxInFlightFor if 0. Whatever it is, the lanes with work (FIFO
	// groups, or messages of a standard queue) and 10 for each open
	// receive stay within 2×Concurrency + 10 per receiver: a standard
	// queue's pool holds at most that many messages, as does a FIFO
	// queue's when every group has one message waiting.
	MaxInFlight     int
	ShutdownTimeout time.Duration // DefaultShutdownTimeout if 0
	WaitTime        time.Duration // long-poll wait; DefaultWaitTime if 0
	AckDelay        time.Duration // DefaultAckDelay if 0
	RetryBase       time.Duration // DefaultRetryBase if 0
	RetryMax        time.Duration // DefaultRetryMax if 0
	// RetryInPlace is how many times a retryable failure is retried in
	// place, with backoff, before the message goes back to SQS: the pool
	// keeps holding it (and, in a FIFO queue, the rest of its group) hidden
	// meanwhile. Every return to SQS raises the receive count of the
	// message and of the followers that come along with it, towards the
	// redrive policy's maxReceiveCount; retrying in place spares them that
	// (and the requests). 0 returns it at once.
	RetryInPlace int
	Log          *slog.Logger
	Observer     Observer
	// Rand jitters the backoffs and makes the receive attempt ids; nil:
	// the runtime's randomness. A test seeds it to replay a run.
	Rand *jitter.Rand
	// OnVisibility, for tests, is told each visibility deadline the pool
	// comes to count on for a receipt, when it does (at the receive, at a
	// confirmed extension), so that a simulation can hold it against SQS's
	// own: it must never be later. Called under the queue's lock: it must
	// not call into the pool.
	OnVisibility func(receipt string, until time.Time)
	// Step, when set, is called where goroutines of the pool that one
	// event wakes together would race (exactly.TestConfig.Step): a lane
	// about to take a handler's slot for a message ("lane <queue>
	// <message id>"), the keeper about to extend ("keep <queue>"), the
	// batcher about to send ("flush <queue>"). A simulation sleeps there to
	// fix their order. Nil: nothing.
	Step func(what string)
}

// Pool consumes queues until its context is cancelled.
type Pool struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	inflight chan struct{} // counting semaphore of received, unfinished messages
	slots    chan struct{} // counting semaphore of running handlers
	want     int           // in-flight slots a receiver gathers before it polls
	// queues in Config.Queues' order: the batchers, keepers and receivers
	// start in it, not in a map's (a simulation's seed replays).
	queues []*queueState
	// maxLanes bounds the lanes with work (pending or running) plus want
	// for every open receive.
	maxLanes int

	mu    sync.Mutex
	lanes map[laneKey]*lane
	// reserved is want for every open receive: the lanes it may add.
	reserved int
	// laneWaiters receivers wait for room among the lanes; laneFreed is
	// closed (and replaced) to wake them when a lane ends or a receive's
	// reservation is released.
	laneWaiters int
	laneFreed   chan struct{}
	stopping    bool
	stopCh      chan struct{} // closed when shutdown begins
	// runEnded is Run's ctx.Done(): shutdown begins when it closes, and
	// Run closes stopCh next.
	runEnded  <-chan struct{}
	pollsDone chan struct{} // closed when no receive is under way any more
	lanesWG   sync.WaitGroup

	workMu      sync.Mutex
	workCtx     context.Context
	cancelWork  context.CancelFunc
	cancelPolls context.CancelFunc
	forced      bool
}

// queueState is the pool's view of one queue: its batcher and the messages
// it holds (received, not yet deleted or handed back), whose visibility the
// keeper extends while they wait for their turn or run.
type queueState struct {
	q   *Queue
	b   *batcher
	vis int32 // visibility timeout asked for at receive, in seconds
	// retryAfter is how soon a failed extension is tried again.
	retryAfter time.Duration
	wake       chan struct{} // asks the keeper for an early round
	// onStale is told of a held delivery whose receipt SQS refused (under mu).
	onStale func(d *delivery, err error)
	// onVisibility is Config.OnVisibility (under mu), or nil.
	onVisibility func(receipt string, until time.Time)
	// pollCtx is the context of the queue's long polls; abandonPolls
	// cancels it: at a stop that finds the queue idle, at Force, at the end
	// of the grace period.
	pollCtx      context.Context
	abandonPolls context.CancelFunc

	mu   sync.Mutex
	held map[*delivery]struct{}
	// byID is held indexed by message ID: one delivery, or two while SQS
	// has handed a message out again, chained by delivery.sameID (holds
	// asks it on every commit, and a scan of held would cost each message
	// the pool's whole hold; a chain, not a slice, costs a message no
	// allocation).
	byID map[string]*delivery
	// groups counts the held deliveries of each FIFO group: a delete waits
	// for the rest of its group (batcher.deleteParked).
	groups map[string]int
}

type laneKey struct{ queue, group string }

type lane struct {
	key     laneKey
	qs      *queueState
	pending []*delivery
}

type delivery struct {
	msg        effect.Message
	receipt    string
	receivedAt time.Time // when its receive was made: SQS handed it out no earlier
	arrivedAt  time.Time // about when the answer came (its span starts then)
	raw        types.Message
	// visibleUntil is when the message becomes visible again unless it is
	// extended; a lower bound of SQS's view: it advances only when SQS
	// confirms an extension. Guarded by queueState.mu, as are the fields
	// below.
	visibleUntil time.Time
	// extending: an extension is queued or sent and not answered yet.
	extending bool
	// retryAt: a failed extension is not tried again before it.
	retryAt time.Time
	// lost: SQS refused the receipt as stale; the worker no longer owns
	// this delivery, and it is neither extended nor started.
	lost bool
	// retries counts the retries in place so far (owned by its lane).
	retries int
	// sameID is the next held delivery of the same message (byID).
	sameID *delivery
}

// New validates cfg and returns a pool.
func New(cfg Config) (*Pool, error) {
	if cfg.Client == nil || cfg.Processor == nil {
		return nil, errors.New("pool: client and processor are required")
	}
	if len(cfg.Queues) == 0 {
		return nil, errors.New("pool: no queues")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.RetryInPlace < 0 {
		return nil, errors.New("pool: RetryInPlace must not be negative")
	}
	cfg.Queues = append([]Queue(nil), cfg.Queues...)
	receivers := 0
	seen := map[string]bool{}
	for i := range cfg.Queues {
		q := &cfg.Queues[i]
		if seen[q.URL] {
			return nil, fmt.Errorf("pool: queue %s is listed twice", q.URL)
		}
		seen[q.URL] = true
		if q.Receivers <= 0 {
			q.Receivers = ReceiversFor(cfg.Concurrency, false)
		}
		if q.Visibility <= 0 {
			return nil, fmt.Errorf("pool: queue %s: visibility timeout must be positive", q.URL)
		}
		if q.Visibility > maxVisibility {
			return nil, fmt.Errorf("pool: queue %s: visibility timeout %s is over SQS's 12 hours", q.URL, q.Visibility)
		}
		if q.Lease <= 0 {
			q.Lease = DefaultLease(q.Visibility)
		}
		receivers += q.Receivers
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = MaxInFlightFor(cfg.Concurrency, receivers)
	}
	cfg.ShutdownTimeout = orDefault(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.WaitTime = orDefault(cfg.WaitTime, DefaultWaitTime)
	cfg.AckDelay = orDefault(cfg.AckDelay, DefaultAckDelay)
	cfg.RetryBase = orDefault(cfg.RetryBase, DefaultRetryBase)
	cfg.RetryMax = orDefault(cfg.RetryMax, DefaultRetryMax)
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	p := &Pool{
		cfg: cfg, log: cfg.Log, obs: cfg.Observer,
		inflight:  make(chan struct{}, cfg.MaxInFlight),
		slots:     make(chan struct{}, cfg.Concurrency),
		lanes:     make(map[laneKey]*lane),
		maxLanes:  2*cfg.Concurrency + maxBatch*receivers,
		laneFreed: make(chan struct{}),
		stopCh:    make(chan struct{}),
		pollsDone: make(chan struct{}),
	}
	p.want = min(maxBatch, max(1, cfg.MaxInFlight/receivers))
	ext, _ := cfg.Observer.(ExtensionObserver)
	for i := range p.cfg.Queues {
		q := &p.cfg.Queues[i]
		url := q.URL
		name := sqsmsg.QueueName(url)
		var extLog logEvery
		b := newBatcher(cfg.Client, url, cfg.AckDelay, func(op string, n int, err error) {
			if op == opExtend {
				if ext != nil {
					ext.ExtensionFailed(name, n)
				}
				if extLog.due(10 * time.Second) {
					p.log.Warn("visibility extension failed; trying again soon", "queue", name, "entries", n, "err", err)
				}
				return
			}
			p.obs.BatchFailed(name, op, n)
			p.log.Warn("batch request failed", "queue", name, "op", op, "entries", n, "err", err)
		})
		if cfg.Step != nil {
			b.step = func() { cfg.Step("flush " + name) }
		}
		vis := visibilitySeconds(q.Visibility)
		p.queues = append(p.queues, &queueState{
			q: q, b: b, vis: vis, held: map[*delivery]struct{}{}, byID: map[string]*delivery{}, groups: map[string]int{}, onVisibility: cfg.OnVisibility,
			retryAfter: time.Duration(vis) * time.Second / 16, wake: make(chan struct{}, 1),
			onStale: func(d *delivery, err error) {
				if ext != nil {
					ext.ReceiptStale(name, 1)
				}
				p.log.Warn("receipt handle refused while extending the visibility: the message is no longer ours; not extending or starting it",
					"queue", name, "message_id", d.msg.ID, "group", d.msg.Group, "err", err)
			},
		})
	}
	return p, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run consumes until ctx is cancelled, then shuts down gracefully: no receive
// starts any more, running handlers get ShutdownTimeout before their context
// is cancelled, received-but-unstarted messages are handed back with
// visibility 0, and pending acknowledgements are flushed. Run returns when all
// of that is done, within ShutdownTimeout plus the final flush. Call Force to
// cut the grace period short. A Pool runs once.
//
// The long polls of a queue the pool holds nothing of when the stop begins
// (an idle one) are cancelled at once; on a FIFO queue what a cancelled poll
// had taken is asked back by its receive request attempt id and handed back
// (recover). SQS keeps serving a poll its client gave up on
// (aws/aws-sdk-go-v2#2068): what it takes in the rest of its wait (at most
// WaitTime) stays in flight for nobody until its visibility timeout, at most
// its MaxNumberOfMessages (10) per abandoned poll. A busy queue's polls are
// left to return (within WaitTime), and what they bring is handed back: an
// abandoned one could take the messages the pool hands back. The end of the
// grace period or Force cancel them too.
func (p *Pool) Run(ctx context.Context) {
	p.workMu.Lock()
	p.workCtx, p.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	var pollCtx context.Context
	pollCtx, p.cancelPolls = context.WithCancel(context.WithoutCancel(ctx))
	if p.forced {
		p.cancelWork()
		p.cancelPolls()
	}
	p.workMu.Unlock()
	defer p.cancelWork()
	defer p.cancelPolls()
	p.runEnded = ctx.Done() // before any lane starts (the receivers start them)
	for _, qs := range p.queues {
		qs.pollCtx, qs.abandonPolls = context.WithCancel(pollCtx)
		go qs.b.run()
	}
	keepCtx, stopKeepers := context.WithCancel(context.Background())
	var keepers sync.WaitGroup
	for _, qs := range p.queues {
		keepers.Go(func() { p.keep(keepCtx, qs) })
	}

	var receivers sync.WaitGroup
	for _, qs := range p.queues {
		for range qs.q.Receivers {
			receivers.Go(func() { p.receive(ctx, qs.pollCtx, qs) })
		}
	}
	<-ctx.Done()
	// What a poll abandoned here brings (recover) waits in its lane: a
	// lane starts nothing once ctx has ended, and hands it back once no
	// poll is open.
	var idle, busy []string
	for _, qs := range p.queues {
		if qs.idle() {
			qs.abandonPolls()
			idle = append(idle, sqsmsg.QueueName(qs.q.URL))
		} else {
			busy = append(busy, sqsmsg.QueueName(qs.q.URL))
		}
	}
	p.log.Info("shutting down: receiving stopped; the long polls of idle queues are abandoned now (on a FIFO queue what they took is asked back by attempt id and handed back); a busy queue's polls are left to return, within the wait time, so that what the pool hands back cannot be taken by an abandoned one; running effects get the grace period; a forced stop (a second signal) ends both now",
		"idle_queues", strings.Join(idle, ","), "busy_queues", strings.Join(busy, ","),
		"grace_ms", p.cfg.ShutdownTimeout.Milliseconds(), "wait_time_ms", p.cfg.WaitTime.Milliseconds())
	p.mu.Lock()
	p.stopping = true
	close(p.stopCh)
	p.mu.Unlock()
	grace := time.AfterFunc(p.cfg.ShutdownTimeout, func() {
		p.log.Warn("shutdown timeout reached: cancelling open long polls and running handlers")
		p.Force()
	})
	receivers.Wait()
	close(p.pollsDone)
	p.lanesWG.Wait()
	grace.Stop()
	stopKeepers()
	keepers.Wait()
	for _, qs := range p.queues {
		qs.b.close()
	}
	p.log.Info("shutdown complete")
}

// Force cancels running handlers at once (a second signal). It is safe to
// call at any time, also before Run.
func (p *Pool) Force() {
	p.workMu.Lock()
	defer p.workMu.Unlock()
	p.forced = true
	if p.cancelWork != nil { // the queues' poll contexts are cancelPolls' children
		p.cancelWork()
		p.cancelPolls()
	}
}

// receive long-polls a queue until ctx is cancelled; a poll under way then
// goes on until it returns or pollCtx is cancelled.
func (p *Pool) receive(ctx, pollCtx context.Context, qs *queueState) {
	q := qs.q
	name := sqsmsg.QueueName(q.URL)
	failures := 0
	var lastLog time.Time
	for ctx.Err() == nil {
		if !p.reserveLanes(ctx) {
			return
		}
		n := p.acquireInflight(ctx)
		if n == 0 {
			p.releaseLanes()
			return
		}
		in := &sqs.ReceiveMessageInput{
			QueueUrl:            &q.URL,
			MaxNumberOfMessages: int32(n),
			WaitTimeSeconds:     qs.wait(p.cfg.WaitTime),
			// Ask for the visibility the keeper works with, whatever the
			// queue's own setting is.
			VisibilityTimeout:           qs.vis,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		}
		if q.FIFO {
			// One id per logical receive; the SDK's retries of this call reuse it.
			in.ReceiveRequestAttemptId = aws.String(p.attemptID())
		}
		start := time.Now()
		out, err := p.cfg.Client.ReceiveMessage(pollCtx, in)
		// Cancelled (the grace period ended, or Force): what the poll took
		// is asked back before the receiver ends.
		cancelled := err != nil && pollCtx.Err() != nil
		if cancelled {
			out, err = p.recover(qs, in, err)
		}
		if err != nil && (cancelled || ctx.Err() != nil) {
			p.releaseLanes()
			p.releaseInflight(n)
			return
		}
		if err != nil {
			p.releaseLanes()
			p.releaseInflight(n)
			failures++
			p.obs.ReceiveError(name, err)
			if time.Since(lastLog) > 10*time.Second {
				p.log.Warn("cannot receive", "queue", name, "consecutive_failures", failures, "err", err)
				lastLog = time.Now()
			}
			sleepCtx(ctx, p.backoff(failures, 100*time.Millisecond, 20*time.Second))
			continue
		}
		failures = 0
		p.releaseInflight(n - len(out.Messages))
		if len(out.Messages) == 0 {
			p.releaseLanes()
			if cancelled {
				return
			}
			continue
		}
		p.obs.Received(name, len(out.Messages))
		p.obs.InFlight(len(out.Messages))
		// SQS handed the messages out at some point of the call, not before
		// it was made: their visibility is counted from then. Any later
		// date could make a delivery look held past what SQS gave it: an
		// answer slow on its way back, or read by a process that stalled
		// meanwhile, may come when SQS has already handed the message to
		// someone else, and a commit on it would break
		// its group's order. An SDK retry of a FIFO receive returns the
		// first attempt's messages, visible since then too. The wait is at
		// most half the visibility (qs.wait), so a fresh delivery has at
		// least that left.
		until := start.Add(time.Duration(qs.vis) * time.Second)
		// When it came, for its span: a long poll that waited got it near
		// the end of its wait.
		now := time.Now()
		arrived := now.Add(-min(now.Sub(start), time.Second))
		ds := make([]*delivery, len(out.Messages))
		qs.mu.Lock()
		for i, m := range out.Messages {
			d := &delivery{msg: sqsmsg.ToMessage(q.URL, m), receipt: aws.ToString(m.ReceiptHandle), receivedAt: start, arrivedAt: arrived, raw: m, visibleUntil: until}
			qs.hold(d)
			qs.believe(d)
			ds[i] = d
		}
		qs.mu.Unlock()
		p.dispatch(qs, ds)
		p.releaseLanes()
		if cancelled {
			return
		}
	}
}

// reserveLanes blocks until this receiver may poll: the lanes with work,
// want for every open receive and want for this one stay within maxLanes.
// Holding more would only make messages wait in the pool: that many lanes
// keep every handler busy through a receive's round trip. Counting lanes,
// not messages, lets a FIFO pool hold a receive's batch of one group per
// handler (up to MaxInFlight) and a standard queue's no more than before.
// It returns false when ctx ends; otherwise releaseLanes must follow once
// the receive's messages are dispatched.
func (p *Pool) reserveLanes(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.lanes)+p.reserved+p.want > p.maxLanes {
		freed := p.laneFreed
		p.laneWaiters++
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.laneWaiters--
		if ctx.Err() != nil {
			return false
		}
	}
	p.reserved += p.want
	return true
}

// releaseLanes ends a receive's reservation.
func (p *Pool) releaseLanes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reserved -= p.want
	p.wakeLaneWaiters()
}

// endLane forgets l, which has no work left (under mu).
func (p *Pool) endLane(l *lane) {
	delete(p.lanes, l.key)
	p.wakeLaneWaiters()
}

// wakeLaneWaiters wakes the receivers waiting for room (under mu).
func (p *Pool) wakeLaneWaiters() {
	if p.laneWaiters > 0 {
		close(p.laneFreed)
		p.laneFreed = make(chan struct{})
	}
}

// acquireInflight blocks until it holds want in-flight slots, want being a
// full batch or this receiver's share of MaxInFlight if that is smaller.
// Receiving as soon as one slot frees up would, at the cap, poll for one or
// two messages at a time. The shares add up to at most MaxInFlight, so the
// receivers cannot starve one another. It returns 0 when ctx ends.
func (p *Pool) acquireInflight(ctx context.Context) int {
	n := 0
	for n < p.want {
		if ctx.Err() != nil { // ended as a slot freed: ended (select would pick at random)
			p.releaseInflight(n)
			return 0
		}
		select {
		case p.inflight <- struct{}{}:
			n++
		case <-ctx.Done():
			p.releaseInflight(n)
			return 0
		}
	}
	return n
}

func (p *Pool) releaseInflight(n int) {
	for range n {
		<-p.inflight
	}
}

// keep extends the visibility of every message the pool holds for a queue,
// running or waiting for its turn, so that SQS never hands it to another
// consumer meanwhile. It looks every vis/8 and extends a message with less
// than vis/2 left of its last confirmed deadline; a failed extension is
// tried again after vis/16 (it wakes the keeper), so that several tries fit
// before the message would become visible.
func (p *Pool) keep(ctx context.Context, qs *queueState) {
	vis := time.Duration(qs.vis) * time.Second
	t := time.NewTicker(max(vis/8, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-qs.wake:
		}
		if p.cfg.Step != nil {
			p.cfg.Step("keep " + sqsmsg.QueueName(qs.q.URL))
		}
		qs.extend(time.Now())
	}
}

// wait is a receive's WaitTimeSeconds: the configured wait, at most half
// the visibility (and at least a second), so that a delivery, dated from
// when its receive was made, has at least half its visibility left when it
// comes.
func (qs *queueState) wait(configured time.Duration) int32 {
	return max(1, min(int32(configured/time.Second), qs.vis/2))
}

func (qs *queueState) extend(now time.Time) {
	vis := time.Duration(qs.vis) * time.Second
	qs.mu.Lock()
	defer qs.mu.Unlock()
	var due []*delivery
	for d := range qs.held {
		if d.lost || d.extending || now.Before(d.retryAt) || d.visibleUntil.Sub(now) >= vis/2 {
			continue
		}
		due = append(due, d)
	}
	// The nearest deadline first, so that it goes in the first batch;
	// and in an order that the map's does not decide, so that a seed
	// replays (internal/sim).
	slices.SortFunc(due, func(a, b *delivery) int {
		if c := a.visibleUntil.Compare(b.visibleUntil); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.msg.ID, b.msg.ID), strings.Compare(a.receipt, b.receipt))
	})
	for _, d := range due {
		// SQS caps a message's visibility at 12 hours from its receipt,
		// counted when the request reaches it: up to the batcher's delay
		// after now, and the request's time on the way (ceilingMargin).
		secs := min(qs.vis, int32((maxVisibility-now.Sub(d.receivedAt)-qs.b.delay-ceilingMargin)/time.Second))
		until := now.Add(time.Duration(secs) * time.Second)
		if secs <= 0 || !until.After(d.visibleUntil) {
			continue
		}
		// SQS counts the new timeout from when it gets the request, after
		// now: until is a lower bound of the new deadline.
		d.extending = true
		qs.b.extend(d.receipt, time.Duration(secs)*time.Second, func(err error) bool { return qs.extended(d, until, err) })
	}
}

// extended records the outcome of d's extension to until: the deadline
// moves only when SQS confirmed it; a failure is tried again after
// retryAfter, unless SQS refused the receipt (the delivery is then lost).
// It answers whether a failure counts: not for a delivery settled or lost
// meanwhile (its delete may have overtaken the extension).
func (qs *queueState) extended(d *delivery, until time.Time, err error) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	d.extending = false
	if _, ok := qs.held[d]; !ok || d.lost {
		return false // settled or released meanwhile: nothing to keep
	}
	switch {
	case err == nil:
		if until.After(d.visibleUntil) {
			d.visibleUntil = until
			qs.believe(d)
		}
		d.retryAt = time.Time{}
	case staleReceipt(err):
		d.lost = true
		qs.onStale(d, err)
	default:
		d.retryAt = time.Now().Add(qs.retryAfter)
		time.AfterFunc(qs.retryAfter, func() {
			select {
			case qs.wake <- struct{}{}:
			default:
			}
		})
	}
	return true
}

// believe tells Config.OnVisibility of d's deadline (under mu).
func (qs *queueState) believe(d *delivery) {
	if qs.onVisibility != nil {
		qs.onVisibility(d.receipt, d.visibleUntil)
	}
}

// logEvery lets a line through at most once per interval.
type logEvery struct {
	mu   sync.Mutex
	last time.Time
}

func (l *logEvery) due(every time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		return false
	}
	l.last = now
	return true
}

// settle ends the pool's hold on d with a delete (del) or a visibility
// change. Under qs.mu, so that no extension can be queued after it.
func (qs *queueState) settle(d *delivery, del bool, vis time.Duration) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	rest := qs.unhold(d)
	switch {
	case del && rest:
		// SQS hands out no more of its group before the rest is deleted
		// too: this delete can wait for them at no cost to the group, and
		// go in one request with them. Not past half of its visibility.
		now := time.Now()
		qs.b.deleteParked(d.receipt, d.msg.Group, now.Add(max(d.visibleUntil.Sub(now)/2, 0)))
	case del:
		// Also for a lost delivery: a standard queue may still take it.
		qs.b.delete(d.receipt)
	case d.lost:
		// SQS refused the receipt already: a hand-back cannot work.
	default:
		qs.b.changeVisibility(d.receipt, vis)
	}
	if len(qs.held) == 0 {
		qs.b.idle()
	}
}

// release ends the hold on d without telling SQS (its receipt is stale).
func (qs *queueState) release(d *delivery) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.unhold(d)
}

// hold adds d to what the pool holds. qs.mu held.
func (qs *queueState) hold(d *delivery) {
	qs.held[d] = struct{}{}
	d.sameID = qs.byID[d.msg.ID]
	qs.byID[d.msg.ID] = d
	if qs.q.FIFO {
		qs.groups[d.msg.Group]++
	}
}

// unhold removes d from what the pool holds and reports whether the pool
// still holds other deliveries of its FIFO group. When it holds none, the
// group's parked deletes are due after the ack delay. qs.mu held.
func (qs *queueState) unhold(d *delivery) (rest bool) {
	if _, ok := qs.held[d]; !ok {
		return false
	}
	delete(qs.held, d)
	switch head := qs.byID[d.msg.ID]; {
	case head == d && d.sameID == nil:
		delete(qs.byID, d.msg.ID)
	case head == d:
		qs.byID[d.msg.ID] = d.sameID
	default:
		for o := head; o != nil; o = o.sameID {
			if o.sameID == d {
				o.sameID = d.sameID
				break
			}
		}
	}
	d.sameID = nil
	if !qs.q.FIFO {
		return false
	}
	g := d.msg.Group
	if qs.groups[g]--; qs.groups[g] > 0 {
		return true
	}
	delete(qs.groups, g)
	qs.b.unpark(g)
	return false
}

// idle reports whether the pool holds no message of the queue.
func (qs *queueState) idle() bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return len(qs.held) == 0
}

// expired reports whether d may no longer be ours: its last confirmed
// deadline has passed, or SQS refused its receipt.
func (qs *queueState) expired(d *delivery, now time.Time) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return d.lost || !now.Before(d.visibleUntil)
}

// holds reports whether the worker still holds d's message: through d,
// or through a newer receipt of it (SQS handed it out again, to this
// worker, after d's visibility passed: it waits in d's lane). Either way
// nobody else has it, and the rest of its group waits behind it.
func (qs *queueState) holds(d *delivery, now time.Time) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	for o := qs.byID[d.msg.ID]; o != nil; o = o.sameID {
		if !o.lost && now.Before(o.visibleUntil) {
			return true
		}
	}
	return false
}

// dispatch adds deliveries to their lanes, starting a runner for a lane that
// has none. In a FIFO queue a lane is a message group; in a standard queue
// every message is its own lane.
func (p *Pool) dispatch(qs *queueState, ds []*delivery) {
	q := qs.q
	if q.FIFO {
		sort.SliceStable(ds, func(i, j int) bool { return sqsmsg.SequenceLess(ds[i].msg.SequenceNumber, ds[j].msg.SequenceNumber) })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		// While stopping, the lane hands it back once no poll is open.
		k := laneKey{queue: q.URL, group: d.msg.Group}
		if !q.FIFO {
			k.group = d.msg.ID
		}
		l, ok := p.lanes[k]
		if !ok {
			l = &lane{key: k, qs: qs}
			p.lanes[k] = l
			p.lanesWG.Add(1)
			go p.runLane(l)
		}
		if old := l.add(d); old != nil {
			qs.release(old)
			p.finish()
		}
	}
}

// add puts d into the lane in sequence order. A message that is already
// pending was received again (its visibility lapsed): the new receipt
// replaces the stale one, which add returns.
func (l *lane) add(d *delivery) (stale *delivery) {
	i := len(l.pending)
	for i > 0 && sqsmsg.SequenceLess(d.msg.SequenceNumber, l.pending[i-1].msg.SequenceNumber) {
		i--
	}
	for j := range l.pending {
		if l.pending[j].msg.ID == d.msg.ID {
			stale, l.pending[j] = l.pending[j], d
			return stale
		}
	}
	l.pending = append(l.pending, nil)
	copy(l.pending[i+1:], l.pending[i:])
	l.pending[i] = d
	return nil
}

// runLane runs a lane's deliveries one after another until it is empty.
func (p *Pool) runLane(l *lane) {
	defer p.lanesWG.Done()
	fifo := l.qs.q.FIFO
	for {
		p.mu.Lock()
		if len(l.pending) == 0 {
			p.endLane(l)
			p.mu.Unlock()
			return
		}
		if p.stopping {
			// Hand back only when no poll of ours is open: it would take
			// them and, cancelled, strand them.
			p.mu.Unlock()
			<-p.pollsDone
			p.mu.Lock()
			rest := l.pending
			l.pending = nil
			p.endLane(l)
			p.mu.Unlock()
			for _, d := range rest {
				p.handBack(l.qs, d)
			}
			return
		}
		d := l.pending[0]
		l.pending = l.pending[1:]
		inPlace := d.retries < p.cfg.RetryInPlace
		p.mu.Unlock()

		if p.cfg.Step != nil {
			p.cfg.Step("lane " + d.msg.QueueName + " " + d.msg.ID)
		}
		stopped := false
		select {
		case p.slots <- struct{}{}:
			// Shutdown began as the slot freed: it wins, as when select
			// picks it (at random among ready cases). It began when Run's
			// context ended, before Run closes stopCh: a stop that ends the
			// context and frees the slot at once (a handler's call that
			// finds its process stopping) must win whichever of Run and
			// this lane runs first.
			select {
			case <-p.stopCh:
				<-p.slots
				stopped = true
			case <-p.runEnded:
				<-p.slots
				<-p.stopCh // Run closes it next
				stopped = true
			default:
			}
		case <-p.stopCh:
			stopped = true
		}
		if stopped {
			p.mu.Lock()
			l.pending = append([]*delivery{d}, l.pending...)
			p.mu.Unlock()
			continue
		}
		// Order: when d goes back to SQS, the rest of its group must wait
		// for it, so what is pending goes back too. It is taken before d is
		// released: once d is visible again, a receive may bring it back
		// into this lane at once, and that fresh delivery must run, not be
		// handed back unstarted (its receive count would rise for nothing).
		// One that left for the dead-letter queue holds nothing back, as when
		// SQS's redrive moves it.
		holdBack := func() {}
		if fifo {
			holdBack = func() { p.handBackPending(l) }
		}
		// A commit that waits in a group commit's transaction gives the
		// slot back (process.Hooks.Yield): another lane runs its effect
		// meanwhile. This lane stays with d until its answer, so the rest
		// of d's group waits for it; it takes a slot again before its next
		// message. Called on this goroutine, inside p.run.
		yielded := false
		yield := func() {
			if !yielded {
				yielded = true
				<-p.slots
			}
		}
		var again time.Duration
		if l.qs.expired(d, time.Now()) {
			// SQS may have handed it to someone else already: leave it to them.
			p.log.Warn("visibility timeout passed (or the receipt went stale) before the message could run; leaving it to SQS",
				"queue", d.msg.QueueName, "message_id", d.msg.ID, "group", d.msg.Group)
			holdBack()
			l.qs.release(d)
			p.finish()
		} else {
			again = p.run(l.qs, d, inPlace, holdBack, yield)
		}
		if !yielded {
			<-p.slots
		}
		if again > 0 {
			p.retryInPlace(l, d, again, holdBack)
		}
	}
}

// ended reports whether shutdown has begun (Run's context ended).
func (p *Pool) ended() bool {
	select {
	case <-p.runEnded:
		return true
	default:
		return false
	}
}

// handBackPending hands back every delivery waiting in l.
func (p *Pool) handBackPending(l *lane) {
	p.mu.Lock()
	rest := l.pending
	l.pending = nil
	p.mu.Unlock()
	for _, d := range rest {
		p.handBack(l.qs, d)
	}
}

// retryInPlace waits out a retry's delay while the pool keeps holding d, then
// puts d back at the head of its lane. If shutdown begins meanwhile, d goes
// back to SQS with the delay (holdBack first); if it was received again (its
// visibility lapsed), the newer delivery takes its place. Shutdown begins
// when Run's context ends, before Run closes stopCh: a timer due in between
// finds it begun (put back, d would not run: the lane checks runEnded before
// it starts anything; but it would go back at once, not with its delay).
func (p *Pool) retryInPlace(l *lane, d *delivery, after time.Duration, holdBack func()) {
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stopCh:
	}
	stopped := false
	select { // whichever woke it: shutdown wins
	case <-p.stopCh:
		stopped = true
	case <-p.runEnded:
		stopped = true
	default:
	}
	if stopped {
		p.log.Info("retry in place given up for shutdown: back to SQS with the delay", "queue", d.msg.QueueName, "message_id", d.msg.ID, "after_ms", after.Milliseconds())
		holdBack()
		l.qs.settle(d, false, after)
		p.finish()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range l.pending {
		if o.msg.ID == d.msg.ID { // a newer receipt of the same message
			l.qs.release(d)
			p.finish()
			return
		}
	}
	l.pending = append([]*delivery{d}, l.pending...)
}

// run processes one delivery and carries out the processor's decision. When
// the message goes back to SQS, holdBack is called first. When inPlace
// allows a retry in place, run returns the delay after which the lane should
// run it again (the pool still holds it then); otherwise 0. yield is the
// processor's Hooks.Yield.
func (p *Pool) run(qs *queueState, d *delivery, inPlace bool, holdBack, yield func()) (again time.Duration) {
	start := time.Now()
	r := p.process(qs, d, yield)
	took := time.Since(start)
	// The message's logger is built only for a line that will be written:
	// most messages end in a Debug line that production does not keep.
	logger := func() *slog.Logger {
		log := p.log.With("queue", d.msg.QueueName, "message_id", d.msg.ID, "group", d.msg.Group,
			"dedup_key", r.Key, "action", r.Action.String(), "duration_ms", took.Milliseconds())
		if r.Outcome != 0 {
			log = log.With("outcome", r.Outcome.String())
		}
		if r.TraceID != "" {
			log = log.With("trace_id", r.TraceID, "span_id", r.SpanID)
		}
		return log
	}
	switch r.Action {
	case process.Delete:
		qs.settle(d, true, 0)
		switch {
		case r.Outcome == dedup.Duplicate:
			// At Info: a duplicate absorbed is what the worker is for, and
			// rare enough in steady state to be worth a line with its key.
			logger().Info("duplicate: not run again; deleted")
		case p.log.Enabled(context.Background(), slog.LevelDebug):
			logger().Debug("done")
		}
	case process.Fail:
		p.fail(qs, d, r, logger(), holdBack)
	case process.Retry:
		if errors.Is(r.Err, process.ErrNotHeld) {
			// As for a delivery whose visibility passed before it started:
			// SQS may have handed it to someone else already.
			logger().Warn("visibility timeout passed while the message ran; nothing more claimed, run or committed on it; leaving it to SQS", "err", r.Err)
			holdBack()
			qs.release(d)
			break
		}
		fallthrough
	default: // Retry, or a processor that returned no action
		after := r.After
		// Busy, or a lease lost: another worker has (or had) the message;
		// waiting here would only hold the group, and SQS brings it back in
		// time if need be. A delay asked for beyond RetryMax is SQS's to
		// wait out too.
		// Nor once shutdown has begun: the pool would not run it again.
		if inPlace && r.Outcome != dedup.Busy && !r.LeaseLost && after <= p.cfg.RetryMax && !p.ended() {
			d.retries++
			if after <= 0 {
				after = p.backoff(d.retries, p.cfg.RetryBase, p.cfg.RetryMax)
			}
			logger().Info("retry in place", "attempt", d.retries, "of", p.cfg.RetryInPlace, "after_ms", after.Milliseconds(), "err", r.Err)
			p.obs.Done(d.msg.QueueName, r, took)
			return max(after, time.Millisecond)
		}
		if after <= 0 {
			after = p.backoff(d.msg.ReceiveCount, p.cfg.RetryBase, p.cfg.RetryMax)
		}
		holdBack()
		qs.settle(d, false, after)
		logger().Info("retry", "after_ms", after.Milliseconds(), "err", r.Err)
	}
	p.finish()
	p.obs.Done(d.msg.QueueName, r, took)
	return 0
}

// process calls the processor; a panic is recovered and retried.
func (p *Pool) process(qs *queueState, d *delivery, yield func()) (r process.Result) {
	q := qs.q
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("processor panicked", "queue", d.msg.QueueName, "message_id", d.msg.ID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			r = process.Result{Action: process.Retry, Err: fmt.Errorf("processor panicked: %v", v)}
		}
	}()
	// The keeper extends the message's visibility; the processor extends
	// the dedup lease at the same pace.
	return p.cfg.Processor.Process(p.workCtx, d.msg, process.Hooks{
		HeartbeatEvery: min(q.Visibility, q.Lease) / 2, Lease: q.Lease, ReceivedAt: d.arrivedAt,
		Held:  func() bool { return qs.holds(d, time.Now()) },
		Yield: yield,
	})
}

// fail moves a permanently failed message to the dead-letter queue when one
// is configured; otherwise, or if the move fails, it leaves the message to
// the queue's redrive policy (holdBack first).
func (p *Pool) fail(qs *queueState, d *delivery, r process.Result, log *slog.Logger, holdBack func()) {
	q := qs.q
	if q.DLQURL != "" {
		in, err := sqsmsg.DeadLetterCopy(q.DLQURL, q.FIFO, d.msg, d.raw.Body, d.raw.MessageAttributes, r.Err, time.Now())
		var copyID string
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var out *sqs.SendMessageOutput
			if out, err = p.cfg.Client.SendMessage(ctx, in); err == nil {
				copyID = aws.ToString(out.MessageId)
			}
			cancel()
		}
		if err == nil {
			qs.settle(d, true, 0)
			// The copy has a MessageId of its own: both ids find it
			// (worker inspect, the console's Find a message).
			log.Error("permanent failure: moved to the dead-letter queue", "dlq", sqsmsg.QueueName(q.DLQURL), "dlq_message_id", copyID, "err", r.Err)
			return
		}
		log.Error("cannot move to the dead-letter queue; leaving it to the redrive policy", "dlq", sqsmsg.QueueName(q.DLQURL), "err", err)
	}
	// Visible again at once: the redrive policy moves it after maxReceiveCount.
	holdBack()
	qs.settle(d, false, 0)
	log.Error("permanent failure: left to the queue's redrive policy", "receive_count", d.msg.ReceiveCount, "err", r.Err)
}

// handBack makes an unstarted delivery visible again at once.
func (p *Pool) handBack(qs *queueState, d *delivery) {
	qs.settle(d, false, 0)
	p.finish()
}

func (p *Pool) finish() {
	p.obs.InFlight(-1)
	<-p.inflight
}

// backoff is capped exponential backoff with full jitter in [d/2, d].
func (p *Pool) backoff(attempt int, base, maxD time.Duration) time.Duration {
	return p.cfg.Rand.Backoff(attempt, base, maxD)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// recoverWait bounds the receive that recovers what a cancelled poll took:
// a short poll, unless the queue's own ReceiveMessageWaitTimeSeconds makes
// it a long one (WaitTimeSeconds 0 cannot be sent: the SDK omits it).
const recoverWait = 25 * time.Second

// recover is called when a poll was cancelled (an idle stop, the end of the
// grace period, or Force) and
// answered err. On a FIFO queue it asks again with the poll's
// ReceiveRequestAttemptId, which SQS answers, for five minutes, with the
// messages the cancelled poll took; the caller dispatches them, and a
// stopping pool's lanes hand them back in group order. A fresh receive
// (the poll had taken nothing) brings messages that go back the same way.
// On a standard queue, or when the retry fails (SQS refuses an attempt id
// it deems not retryable, after a throttled receive), it logs what may stay
// hidden and for how long, and returns an error: the receiver ends. A
// failed retry is counted as a receive error (Observer.ReceiveError).
func (p *Pool) recover(qs *queueState, in *sqs.ReceiveMessageInput, pollErr error) (*sqs.ReceiveMessageOutput, error) {
	name := sqsmsg.QueueName(qs.q.URL)
	hidden := (time.Duration(qs.vis) * time.Second).Milliseconds()
	if !qs.q.FIFO {
		if !errors.Is(pollErr, context.Canceled) {
			return nil, pollErr // it failed as shutdown began: it took nothing
		}
		p.log.Info("long poll abandoned: a message SQS hands it in the rest of its wait stays hidden until its visibility timeout (a standard queue has no receive attempt id to get it back by)",
			"queue", name, "max_messages", in.MaxNumberOfMessages, "hidden_up_to_ms", hidden, "err", pollErr)
		return nil, pollErr
	}
	retry := *in
	retry.WaitTimeSeconds = 0
	ctx, cancel := context.WithTimeout(context.Background(), recoverWait)
	defer cancel()
	out, err := p.cfg.Client.ReceiveMessage(ctx, &retry)
	if err != nil {
		p.obs.ReceiveError(name, err)
		p.log.Warn("long poll cancelled and what it took cannot be asked back: a message it took stays hidden, and holds its group, until its visibility timeout",
			"queue", name, "attempt_id", aws.ToString(in.ReceiveRequestAttemptId), "hidden_up_to_ms", hidden, "err", err)
		return nil, err
	}
	if len(out.Messages) > 0 {
		p.log.Info("long poll cancelled; got back what it took, to hand back", "queue", name, "messages", len(out.Messages))
	}
	return out, nil
}

func (p *Pool) attemptID() string {
	id, err := p.cfg.Rand.ID()
	if err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36) // crypto/rand failed: any id will do
	}
	return id
}

type nopObserver struct{}

func (nopObserver) Received(string, int)                       {}
func (nopObserver) Done(string, process.Result, time.Duration) {}
func (nopObserver) ReceiveError(string, error)                 {}
func (nopObserver) BatchFailed(string, string, int)            {}
func (nopObserver) InFlight(int)                               {}
