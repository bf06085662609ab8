// Package pool receives messages from SQS queues and runs them through the
// exactly-once processor: per (queue, message group) strictly in order,
// different groups in parallel up to a concurrency limit, with visibility
// heartbeats, batched acknowledgements, backoff and graceful shutdown.
package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// Defaults.
const (
	WaitTimeDefault        = 20 * time.Second
	ReceiversDefault       = 2
	ConcurrencyDefault     = 32
	ShutdownTimeoutDefault = 90 * time.Second // inside ECS's 120 s stopTimeout
	AckDelayDefault        = 10 * time.Millisecond
	RetryBaseDefault       = 1 * time.Second
	RetryMaxDefault        = 5 * time.Minute
)

// Queue is one queue the pool consumes.
type Queue struct {
	URL        string
	FIFO       bool
	Visibility time.Duration // the queue's VisibilityTimeout; heartbeats run at half of it
	Lease      time.Duration // dedup lease per claim; Visibility if 0
	Receivers  int           // concurrent long polls; ReceiversDefault if 0
	// DLQURL, when set, receives permanent failures directly (keeping group
	// and dedup ids); otherwise they are left to the queue's redrive policy.
	DLQURL string
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
	BatchFailed(queue, op string, n int)
	InFlight(delta int)
}

// Config of a Pool.
type Config struct {
	Client          SQS
	Queues          []Queue
	Processor       Processor
	Concurrency     int           // handlers running at once; ConcurrencyDefault if 0
	MaxInFlight     int           // received but not finished; 2×Concurrency+10 per receiver if 0
	ShutdownTimeout time.Duration // ShutdownTimeoutDefault if 0
	WaitTime        time.Duration // long-poll wait; WaitTimeDefault if 0
	AckDelay        time.Duration // AckDelayDefault if 0
	RetryBase       time.Duration // RetryBaseDefault if 0
	RetryMax        time.Duration // RetryMaxDefault if 0
	Log             *slog.Logger
	Observer        Observer
}

// Pool consumes queues until its context is cancelled.
type Pool struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	inflight chan struct{} // counting semaphore of received, unfinished messages
	slots    chan struct{} // counting semaphore of running handlers

	mu       sync.Mutex
	lanes    map[laneKey]*lane
	stopping bool
	stopCh   chan struct{} // closed when shutdown begins
	lanesWG  sync.WaitGroup

	workCtx    context.Context
	cancelWork context.CancelFunc
	batchers   map[string]*batcher
	queues     map[string]*Queue
}

type laneKey struct{ queue, group string }

type lane struct {
	key     laneKey
	queue   *Queue
	pending []*delivery
}

type delivery struct {
	msg        effect.Message
	receipt    string
	receivedAt time.Time
	raw        types.Message
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
		cfg.Concurrency = ConcurrencyDefault
	}
	receivers := 0
	for i := range cfg.Queues {
		q := &cfg.Queues[i]
		if q.Receivers <= 0 {
			q.Receivers = ReceiversDefault
		}
		if q.Visibility <= 0 {
			return nil, fmt.Errorf("pool: queue %s: visibility timeout must be positive", q.URL)
		}
		if q.Lease <= 0 {
			q.Lease = q.Visibility
		}
		receivers += q.Receivers
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 2*cfg.Concurrency + maxBatch*receivers
	}
	cfg.ShutdownTimeout = orDefault(cfg.ShutdownTimeout, ShutdownTimeoutDefault)
	cfg.WaitTime = orDefault(cfg.WaitTime, WaitTimeDefault)
	cfg.AckDelay = orDefault(cfg.AckDelay, AckDelayDefault)
	cfg.RetryBase = orDefault(cfg.RetryBase, RetryBaseDefault)
	cfg.RetryMax = orDefault(cfg.RetryMax, RetryMaxDefault)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	p := &Pool{
		cfg: cfg, log: cfg.Log, obs: cfg.Observer,
		inflight: make(chan struct{}, cfg.MaxInFlight),
		slots:    make(chan struct{}, cfg.Concurrency),
		lanes:    make(map[laneKey]*lane),
		stopCh:   make(chan struct{}),
		batchers: make(map[string]*batcher),
		queues:   make(map[string]*Queue),
	}
	for i := range cfg.Queues {
		q := &p.cfg.Queues[i]
		p.queues[q.URL] = q
	}
	return p, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Run consumes until ctx is cancelled, then shuts down gracefully: receiving
// stops at once, running handlers get ShutdownTimeout before their context is
// cancelled, received-but-unstarted messages are handed back with visibility
// 0, and pending acknowledgements are flushed. Run returns when all of that
// is done. Call Force to cut the grace period short.
func (p *Pool) Run(ctx context.Context) error {
	p.workCtx, p.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer p.cancelWork()
	for url := range p.queues {
		b := newBatcher(p.cfg.Client, url, p.cfg.AckDelay, func(op string, n int, err error) {
			p.obs.BatchFailed(QueueName(url), op, n)
			p.log.Warn("batch request failed", "queue", QueueName(url), "op", op, "entries", n, "err", err)
		})
		p.batchers[url] = b
		go b.run()
	}

	var receivers sync.WaitGroup
	for _, q := range p.queues {
		for range q.Receivers {
			receivers.Go(func() { p.receive(ctx, q) })
		}
	}
	<-ctx.Done()
	p.log.Info("shutting down: receiving stopped", "grace", p.cfg.ShutdownTimeout)
	p.mu.Lock()
	p.stopping = true
	close(p.stopCh)
	p.mu.Unlock()
	receivers.Wait()

	grace := time.AfterFunc(p.cfg.ShutdownTimeout, func() {
		p.log.Warn("shutdown timeout reached: cancelling running handlers")
		p.cancelWork()
	})
	p.lanesWG.Wait()
	grace.Stop()
	for _, b := range p.batchers {
		b.close()
	}
	p.log.Info("shutdown complete")
	return nil
}

// Force cancels running handlers at once (a second signal).
func (p *Pool) Force() {
	if p.cancelWork != nil {
		p.cancelWork()
	}
}

// receive long-polls q until ctx is cancelled.
func (p *Pool) receive(ctx context.Context, q *Queue) {
	name := QueueName(q.URL)
	failures := 0
	var lastLog time.Time
	for ctx.Err() == nil {
		n := p.acquireInflight(ctx)
		if n == 0 {
			return
		}
		in := &sqs.ReceiveMessageInput{
			QueueUrl:                    &q.URL,
			MaxNumberOfMessages:         int32(n),
			WaitTimeSeconds:             int32(p.cfg.WaitTime / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		}
		if q.FIFO {
			// One id per logical receive; the SDK's retries of this call reuse it.
			in.ReceiveRequestAttemptId = aws.String(newAttemptID())
		}
		out, err := p.cfg.Client.ReceiveMessage(ctx, in)
		if err != nil {
			p.releaseInflight(n)
			if ctx.Err() != nil {
				return
			}
			failures++
			p.obs.ReceiveError(name, err)
			if time.Since(lastLog) > 10*time.Second {
				p.log.Warn("cannot receive", "queue", name, "consecutive_failures", failures, "err", err)
				lastLog = time.Now()
			}
			sleepCtx(ctx, backoff(failures, 100*time.Millisecond, 20*time.Second))
			continue
		}
		failures = 0
		p.releaseInflight(n - len(out.Messages))
		if len(out.Messages) == 0 {
			continue
		}
		p.obs.Received(name, len(out.Messages))
		p.obs.InFlight(len(out.Messages))
		now := time.Now()
		ds := make([]*delivery, len(out.Messages))
		for i, m := range out.Messages {
			ds[i] = &delivery{msg: ToMessage(q.URL, m), receipt: aws.ToString(m.ReceiptHandle), receivedAt: now, raw: m}
		}
		p.dispatch(q, ds)
	}
}

// acquireInflight blocks for one in-flight slot, then takes up to a batch.
func (p *Pool) acquireInflight(ctx context.Context) int {
	select {
	case p.inflight <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < maxBatch {
		select {
		case p.inflight <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	return n
}

func (p *Pool) releaseInflight(n int) {
	for range n {
		<-p.inflight
	}
}

// dispatch appends deliveries to their lanes, starting a runner for a lane
// that has none. In a FIFO queue a lane is a message group; in a standard
// queue every message is its own lane.
func (p *Pool) dispatch(q *Queue, ds []*delivery) {
	if q.FIFO {
		sort.SliceStable(ds, func(i, j int) bool { return seqLess(ds[i].msg.SequenceNumber, ds[j].msg.SequenceNumber) })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		k := laneKey{queue: q.URL, group: d.msg.Group}
		if !q.FIFO {
			k.group = d.msg.ID
		}
		if p.stopping {
			p.handBack(q, d)
			continue
		}
		l, ok := p.lanes[k]
		if !ok {
			l = &lane{key: k, queue: q}
			p.lanes[k] = l
			p.lanesWG.Add(1)
			go p.runLane(l)
		}
		l.pending = append(l.pending, d)
	}
}

// runLane runs a lane's deliveries one after another until it is empty.
func (p *Pool) runLane(l *lane) {
	defer p.lanesWG.Done()
	for {
		p.mu.Lock()
		if len(l.pending) == 0 {
			delete(p.lanes, l.key)
			p.mu.Unlock()
			return
		}
		if p.stopping {
			rest := l.pending
			l.pending = nil
			delete(p.lanes, l.key)
			p.mu.Unlock()
			for _, d := range rest {
				p.handBack(l.queue, d)
			}
			return
		}
		d := l.pending[0]
		l.pending = l.pending[1:]
		p.mu.Unlock()

		select {
		case p.slots <- struct{}{}:
		case <-p.stopCh:
			p.mu.Lock()
			l.pending = append([]*delivery{d}, l.pending...)
			p.mu.Unlock()
			continue
		}
		r := p.run(l.queue, d)
		<-p.slots
		if r.Action != process.Delete && l.queue.FIFO {
			// Order: the rest of this group must wait for this message.
			p.mu.Lock()
			rest := l.pending
			l.pending = nil
			p.mu.Unlock()
			for _, d := range rest {
				p.handBack(l.queue, d)
			}
		}
	}
}

// run processes one delivery and carries out the processor's decision.
func (p *Pool) run(q *Queue, d *delivery) process.Result {
	start := time.Now()
	b := p.batchers[q.URL]
	hb := func(ctx context.Context) error {
		// SQS caps a message's visibility at 12 hours from its receipt.
		left := maxVisibility - time.Since(d.receivedAt)
		b.changeVisibility(d.receipt, min(q.Visibility, left))
		return nil
	}
	r := p.cfg.Processor.Process(p.workCtx, d.msg, process.Hooks{
		Heartbeat: hb, HeartbeatEvery: min(q.Visibility, q.Lease) / 2, Lease: q.Lease,
	})
	took := time.Since(start)
	log := p.log.With("queue", d.msg.QueueName, "message_id", d.msg.ID, "group", d.msg.Group,
		"dedup_key", r.Key, "action", r.Action.String(), "duration_ms", took.Milliseconds())
	if r.Outcome != 0 {
		log = log.With("outcome", r.Outcome.String())
	}
	switch r.Action {
	case process.Delete:
		b.delete(d.receipt)
		log.Debug("done")
	case process.Retry:
		after := r.After
		if after <= 0 {
			after = backoff(d.msg.ReceiveCount, p.cfg.RetryBase, p.cfg.RetryMax)
		}
		b.changeVisibility(d.receipt, after)
		log.Info("retry", "after", after, "err", r.Err)
	case process.Fail:
		p.fail(q, d, r, log)
	}
	p.finish()
	p.obs.Done(d.msg.QueueName, r, took)
	return r
}

func (p *Pool) fail(q *Queue, d *delivery, r process.Result, log *slog.Logger) {
	b := p.batchers[q.URL]
	if q.DLQURL != "" {
		in := &sqs.SendMessageInput{
			QueueUrl: &q.DLQURL, MessageBody: d.raw.Body, MessageAttributes: d.raw.MessageAttributes,
		}
		if q.FIFO {
			in.MessageGroupId = aws.String(d.msg.Group)
			in.MessageDeduplicationId = aws.String(d.msg.DedupID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.cfg.Client.SendMessage(ctx, in)
		cancel()
		if err == nil {
			b.delete(d.receipt)
			log.Error("permanent failure: moved to the dead-letter queue", "dlq", QueueName(q.DLQURL), "err", r.Err)
			return
		}
		log.Error("cannot move to the dead-letter queue; leaving it to the redrive policy", "err", err)
	}
	// Visible again at once: the redrive policy moves it after maxReceiveCount.
	b.changeVisibility(d.receipt, 0)
	log.Error("permanent failure: left to the queue's redrive policy", "receive_count", d.msg.ReceiveCount, "err", r.Err)
}

// handBack makes an unstarted delivery visible again at once.
func (p *Pool) handBack(q *Queue, d *delivery) {
	p.batchers[q.URL].changeVisibility(d.receipt, 0)
	p.finish()
}

func (p *Pool) finish() {
	p.obs.InFlight(-1)
	<-p.inflight
}

// backoff is capped exponential backoff with full jitter in [d/2, d].
func backoff(attempt int, base, maxD time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := time.Duration(float64(base) * math.Pow(2, float64(min(attempt-1, 30))))
	if d > maxD || d <= 0 {
		d = maxD
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type nopObserver struct{}

func (nopObserver) Received(string, int)                       {}
func (nopObserver) Done(string, process.Result, time.Duration) {}
func (nopObserver) ReceiveError(string, error)                 {}
func (nopObserver) BatchFailed(string, string, int)            {}
func (nopObserver) InFlight(int)                               {}
