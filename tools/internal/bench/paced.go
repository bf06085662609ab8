package bench

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
)

// A paced run of `bench consume -pace R`: a producer in the consumer's
// process sends R messages a second while the consumer runs, and every
// message sent in the window has its send-to-effect time measured: from
// the start of its SendMessage call (held by the latency layer as a real
// producer's) to the start of its first effect's writes (timedLedger.Apply
// after the effect's own wait, where the ledger stamps applied_at: the
// main report's paced run reads applied_at, so the two measure the same
// span). A message's first effect counts; a redelivery's does not.

// sendEffects pairs each paced message's send with its first effect. The
// latency layer holds a send's answer after the message is in the queue,
// so an effect may start before its send returns the message id: the
// effect then waits in early for its send.
type sendEffects struct {
	mu      sync.Mutex
	pending map[string]pendingSend // message id -> its send, awaiting its effect
	early   map[string]time.Time   // message id -> its effect's start, awaiting its send
	samples []time.Duration        // the window's messages' send-to-effect times
	sent    int                    // the window's messages sent (their sends returned)
	offered float64                // the rate the window's sends were dispatched at, msg/s
	done    bool                   // the producer has stopped
}

type pendingSend struct {
	at      time.Time
	counted bool // sent in the window
}

// earlyCap is when early is pruned of entries older than earlyAge: an
// effect of a message no paced send will claim (the pre-fill's, a
// redelivery's) would otherwise stay.
const (
	earlyCap = 1024
	earlyAge = 10 * time.Second
)

func newSendEffects() *sendEffects {
	return &sendEffects{pending: map[string]pendingSend{}, early: map[string]time.Time{}}
}

// sentAt records that message id's send started at at; counted: the
// message is one of the window's.
func (r *sendEffects) sentAt(id string, at time.Time, counted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if counted {
		r.sent++
	}
	if e, ok := r.early[id]; ok {
		delete(r.early, id)
		if counted {
			r.samples = append(r.samples, e.Sub(at))
		}
		return
	}
	r.pending[id] = pendingSend{at: at, counted: counted}
}

// effectAt records that an effect of message id started its writes at at.
func (r *sendEffects) effectAt(id string, at time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pending[id]; ok {
		delete(r.pending, id)
		if p.counted {
			r.samples = append(r.samples, at.Sub(p.at))
		}
		return
	}
	if _, ok := r.early[id]; ok {
		return // a redelivery before its send returned: the first counts
	}
	if len(r.early) >= earlyCap {
		for k, e := range r.early {
			if at.Sub(e) > earlyAge {
				delete(r.early, k)
			}
		}
	}
	r.early[id] = at
}

// pacedReading is what a paced run has measured so far.
type pacedReading struct {
	Sent, Measured int // the window's messages sent, and of those applied
	P50, P99       time.Duration
	Offered        float64
	Done           bool
}

func (r *sendEffects) read() pacedReading {
	r.mu.Lock()
	ds := append([]time.Duration(nil), r.samples...)
	out := pacedReading{Sent: r.sent, Measured: len(ds), Offered: r.offered, Done: r.done}
	r.mu.Unlock()
	ps := Percentiles(ds, 0.5, 0.99)
	out.P50, out.P99 = ps[0], ps[1]
	return out
}

// Metric names of a paced run, read into Sample.Counts (counterNames).
var (
	pacedSentDesc     = prometheus.NewDesc("exactly_bench_paced_sent", "messages of the paced window sent (their SendMessage returned)", nil, nil)
	pacedMeasuredDesc = prometheus.NewDesc("exactly_bench_paced_measured", "messages of the paced window whose effect started", nil, nil)
	pacedP50Desc      = prometheus.NewDesc("exactly_bench_send_effect_p50_seconds", "send to effect start, median over the paced window's messages (nearest rank)", nil, nil)
	pacedP99Desc      = prometheus.NewDesc("exactly_bench_send_effect_p99_seconds", "send to effect start, 99th percentile over the paced window's messages (nearest rank)", nil, nil)
	pacedOfferedDesc  = prometheus.NewDesc("exactly_bench_paced_offered_rate", "the rate the paced window's messages were dispatched at, msg/s", nil, nil)
	pacedDoneDesc     = prometheus.NewDesc("exactly_bench_paced_done", "1 once the paced producer has stopped", nil, nil)
)

// Describe and Collect export the reading: the quantiles from every
// sample, sorted at each scrape.
func (r *sendEffects) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pacedSentDesc, pacedMeasuredDesc, pacedP50Desc, pacedP99Desc, pacedOfferedDesc, pacedDoneDesc} {
		ch <- d
	}
}

func (r *sendEffects) Collect(ch chan<- prometheus.Metric) {
	v := r.read()
	done := 0.0
	if v.Done {
		done = 1
	}
	for d, x := range map[*prometheus.Desc]float64{
		pacedSentDesc: float64(v.Sent), pacedMeasuredDesc: float64(v.Measured), pacedP50Desc: v.P50.Seconds(), pacedP99Desc: v.P99.Seconds(),
		pacedOfferedDesc: v.Offered, pacedDoneDesc: done,
	} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x)
	}
}

// producer sends message first+k at start + k/rate, for k from 0: the
// first warmup×rate messages warm up, the next window×rate are the
// window's (window 0: every later message, until ctx ends). Sends go
// through lanes, each sending its messages one after another, message
// i's lane being lane(i): a FIFO group's messages share a lane, so they
// reach the queue in order (the ledger refuses a seq that goes back).
type producer struct {
	rate           float64
	warmup, window time.Duration
	first          int
	lanes          int
	lane           func(i int) int
	send           func(ctx context.Context, i int) (id string, err error)
	rec            *sendEffects
	failed         func(error) // a send that failed (not while ctx ends); nil: ignored
}

// run sends until the window's last message or until ctx ends; it returns
// once every lane's send has returned.
func (p *producer) run(ctx context.Context) {
	defer func() {
		p.rec.mu.Lock()
		p.rec.done = true
		p.rec.mu.Unlock()
	}()
	from := int(p.warmup.Seconds() * p.rate)
	to := -1
	if p.window > 0 {
		to = from + int(p.window.Seconds()*p.rate)
	}
	lanes := make([]chan int, max(p.lanes, 1))
	var wg sync.WaitGroup
	for j := range lanes {
		lanes[j] = make(chan int, 1024)
		wg.Go(func() {
			for k := range lanes[j] {
				at := time.Now()
				id, err := p.send(ctx, p.first+k)
				if err != nil {
					if ctx.Err() == nil && p.failed != nil {
						p.failed(err)
					}
					continue
				}
				p.rec.sentAt(id, at, k >= from && (to < 0 || k < to))
			}
		})
	}
	defer func() {
		for _, l := range lanes {
			close(l)
		}
		wg.Wait()
	}()
	start := time.Now()
	var windowStart time.Time
	for k := 0; to < 0 || k < to; k++ {
		if err := hold(ctx, time.Until(start.Add(time.Duration(float64(k)*float64(time.Second)/p.rate)))); err != nil {
			return
		}
		now := time.Now()
		if k == from {
			windowStart = now
		}
		if k > from {
			p.rec.mu.Lock()
			p.rec.offered = float64(k-from) / now.Sub(windowStart).Seconds()
			p.rec.mu.Unlock()
		}
		select {
		case lanes[p.lane(p.first+k)%len(lanes)] <- k:
		case <-ctx.Done():
			return
		}
	}
}

// pacedProducer is -pace's producer on the fakes: the workload after the
// pre-fill (Work.Entry(prefill+k): the same groups, bodies and seqs,
// going on), each group's messages to the queue the pre-fill gave it
// (group % queues). Its SendMessage is held by the latency layer as a
// real producer's, with draws of its own, and counted apart from the
// consumer's requests (SQS req/msg stays the consumer's).
func (o *consumeOpts) pacedProducer(rec *sendEffects, failed func(error)) *producer {
	w := Workload(o.prefill, o.groups)
	w.Size, w.Standard = o.size, o.standard
	sq := &heldSQS{s: o.srv, l: NewLatency(o.scale, o.jitter, o.seed+1<<32), c: newCounter(prometheus.NewRegistry())}
	urls := o.queueURLs
	return &producer{
		rate: o.pace, warmup: o.paceWarmup, window: o.paceWindow, first: o.prefill,
		lanes: min(w.Groups, 64), lane: func(i int) int { return i % w.Groups },
		send: func(ctx context.Context, i int) (string, error) {
			e := w.Entry(i)
			out, err := sq.SendMessage(ctx, &sqs.SendMessageInput{
				QueueUrl: &urls[(i%w.Groups)%len(urls)], MessageBody: e.MessageBody,
				MessageGroupId: e.MessageGroupId, MessageDeduplicationId: e.MessageDeduplicationId,
			})
			if err != nil {
				return "", err
			}
			return aws.ToString(out.MessageId), nil
		},
		rec: rec, failed: failed,
	}
}
