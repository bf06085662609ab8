package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/outbox"
)

// Producers of the relay comparison.
const (
	// RelayDirect writes the business item (PutItem), then sends the
	// message straight to SQS (SendMessage): the dual write the outbox
	// replaces.
	RelayDirect = "direct"
	// RelayOutbox commits the business item and the message in one
	// outbox.Write; an outbox.Relay with its defaults publishes it.
	RelayOutbox = "outbox"
	// RelayGroupBatch is RelayOutbox with Relay.GroupBatch at
	// RelayGroupBatchSize: a group's messages go up to that many to a
	// SendMessageBatch.
	RelayGroupBatch = "outbox-group-batch"
	// RelayGroupBatchAlone is RelayGroupBatch with each Write a
	// transaction of its own (outbox.WithoutCombining): concurrent Writes
	// of one group race for its head, as before combining.
	RelayGroupBatchAlone = "outbox-group-batch-alone"
)

// The relay alone, on a backlog: the outbox table is filled before the
// relay starts (in Writes of relayBacklogWrite messages, outside the
// window) and no producer runs, so the rate is the relay's own, whatever
// outbox.Write of one group can take (its head serialises a group's
// Writes).
const (
	RelayBacklog           = "backlog"
	RelayBacklogGroupBatch = "backlog-group-batch"
	relayBacklogWrite      = 90
)

// RelayGroupBatchSize and RelayGroupBatchPerGroup are the Relay.GroupBatch
// and Relay.PerGroup of RelayGroupBatch and RelayBacklogGroupBatch: the
// settings for a hot group (50 of its messages a round, in requests of
// 10; the default reads 10 a round).
const (
	RelayGroupBatchSize     = 10
	RelayGroupBatchPerGroup = 50
)

// relayModes are the producers of the relay comparison at groups, in
// order; the backlog and the Writes without combining run at one group
// only (the hot group; over many groups the relay drains a backlog faster
// than a window lasts, and Writes of one group rarely meet).
func relayModes(groups int) []string {
	modes := []string{RelayDirect, RelayOutbox, RelayGroupBatch}
	if groups == 1 {
		modes = append(modes, RelayGroupBatchAlone, RelayBacklog, RelayBacklogGroupBatch)
	}
	return modes
}

// relayBacklogSize is the backlog of the relay-alone runs: more than the
// relay can publish in the warm-up and the window at one message per ms.
func (h *harness) relayBacklogSize() int {
	return int((h.cfg.Warmup + h.cfg.Window) / time.Millisecond)
}

// DefaultRelayGroups are the group counts of the relay comparison: one hot
// group, and many.
func DefaultRelayGroups() []int { return []int{1, 200} }

// DefaultRelayWriters is the producer goroutines of the relay comparison.
const DefaultRelayWriters = 16

// RelayRun is one producer's run at AWS-like latency, in this process, on
// the fakes: messages per second that reached SQS, and what they cost.
type RelayRun struct {
	Mode           string
	Groups         int
	Writers        int
	Seconds        float64
	Rate           float64 // messages that reached SQS per second
	Written        float64 // messages the producers committed (outbox) or sent (direct) in the window
	Window         Sample  // requests and write units in the window; Counts["applied"] = messages that reached SQS
	ProducerErrors float64
	Load           string `json:",omitempty"` // the machine's load average as the run began
	// P50 and P99 are the time from a producer beginning a message's write
	// (outbox.Write, or the direct producer's PutItem) to SQS taking it,
	// over the messages SQS took in the window: zero for the backlog modes
	// (their messages were written before the run) and runs before
	// 2026-12-04.
	P50, P99 time.Duration `json:",omitzero"`
}

// relayRun returns the run of mode at groups.
func (r *Result) relayRun(mode string, groups int) (RelayRun, bool) {
	for _, x := range r.Relay {
		if x.Mode == mode && x.Groups == groups {
			return x, true
		}
	}
	return RelayRun{}, false
}

// measureRelay runs mode with writers producers over groups groups for
// warmup + window on fresh fakes behind the latency layer.
func (h *harness) measureRelay(ctx context.Context, mode string, groups, writers int) (RelayRun, error) {
	run := RelayRun{Mode: mode, Groups: groups, Writers: writers, Load: LoadAvg()}
	srv := memsqs.New()
	mdb := memdynamo.New()
	q, err := srv.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String("relay.fifo"), Attributes: map[string]string{"FifoQueue": "true", "VisibilityTimeout": "30"},
	})
	if err != nil {
		return run, err
	}
	url := aws.ToString(q.QueueUrl)
	if _, err := mdb.CreateTable(ctx, keyedTableInput("business")); err != nil {
		return run, err
	}
	if _, err := mdb.CreateTable(ctx, outbox.CreateTableInput("outbox")); err != nil {
		return run, err
	}
	l := NewLatency(h.cfg.LatencyScale, h.cfg.Jitter, h.cfg.Seed+uint64(groups))
	c := newCounter(prometheus.NewRegistry())
	sq := &heldSQS{s: srv, l: l, c: c}
	db := &heldDynamoDB{d: mdb, l: l, c: c}

	// What reached SQS is what the queue holds (nothing receives from
	// it), read from the fake itself, untimed and uncounted: a relay's
	// sweep can outlast the window, and a copy SQS deduplicated is not a
	// message.
	reached := func() (int64, error) {
		out, err := srv.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], 10, 64)
	}
	var written, failed atomic.Int64
	lat := newWriteToSQS()
	// The warm-up begins when the relay's first sweep that published ends:
	// before it the relay waits out its idle Poll (a second) while the
	// producers fill the table, and a window opened then counts that
	// backlog too. A sweep over many groups moves each group's messages
	// once, in a pass that can take seconds: the window holds at least
	// three passes as long as that first one, or it counts a part of one.
	busy := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	lastRound, pass := time.Now(), time.Duration(0)
	onRound := func(r outbox.Round) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if r.Published > 0 {
			once.Do(func() { pass = now.Sub(lastRound); close(busy) })
		}
		lastRound = now
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var seq atomic.Int64
	business := func(i int64) ddbtypes.Put {
		return ddbtypes.Put{TableName: aws.String("business"), Item: map[string]ddbtypes.AttributeValue{
			"pk": str("order-" + strconv.FormatInt(i, 10)), "amount_cents": num(i % 97),
		}}
	}
	body := func(i int64) string { return fmt.Sprintf(`{"order":%d}`, i) }
	group := func(i int64) string { return "g" + strconv.FormatInt(i%int64(groups), 10) }
	switch mode {
	case RelayDirect:
		close(busy)
		for range writers {
			wg.Go(func() {
				for rctx.Err() == nil {
					i := seq.Add(1)
					p := business(i)
					began := time.Now()
					if _, err := db.PutItem(rctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item}); err != nil {
						failed.Add(1)
						continue
					}
					_, err := sq.SendMessage(rctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body(i)),
						MessageGroupId: aws.String(group(i)), MessageDeduplicationId: aws.String(strconv.FormatInt(i, 10))})
					if err != nil {
						failed.Add(1)
						continue
					}
					written.Add(1)
					lat.took(began, time.Now())
				}
			})
		}
	case RelayBacklog, RelayBacklogGroupBatch:
		ob := outbox.New(db, "outbox")
		n := h.relayBacklogSize()
		var msgs []outbox.Message
		for range n {
			i := seq.Add(1)
			msgs = append(msgs, outbox.Message{QueueURL: url, Group: group(i), Body: body(i), ID: strconv.FormatInt(i, 10)})
		}
		// A group's messages together: a Write reads the head of each
		// group it holds.
		slices.SortStableFunc(msgs, func(a, b outbox.Message) int { return strings.Compare(a.Group, b.Group) })
		for len(msgs) > 0 {
			k := min(len(msgs), relayBacklogWrite)
			if err := ob.Write(ctx, msgs[:k]); err != nil {
				return run, fmt.Errorf("relay backlog: %w", err)
			}
			msgs = msgs[k:]
		}
		relay := &outbox.Relay{DB: db, SQS: sq, Table: "outbox", Logger: slog.New(slog.DiscardHandler), Concurrency: h.cfg.RelayConcurrency,
			OnRound: onRound}
		if mode == RelayBacklogGroupBatch {
			relay.GroupBatch, relay.PerGroup = RelayGroupBatchSize, RelayGroupBatchPerGroup
		}
		wg.Go(func() { _ = relay.Run(rctx) })
	case RelayOutbox, RelayGroupBatch, RelayGroupBatchAlone:
		var opts []outbox.Option
		if mode == RelayGroupBatchAlone {
			opts = append(opts, outbox.WithoutCombining())
		}
		ob := outbox.New(db, "outbox", opts...)
		for range writers {
			wg.Go(func() {
				for rctx.Err() == nil {
					i := seq.Add(1)
					p := business(i)
					lat.began(body(i), time.Now())
					err := ob.Write(rctx, []outbox.Message{{QueueURL: url, Group: group(i), Body: body(i), ID: strconv.FormatInt(i, 10)}},
						ddbtypes.TransactWriteItem{Put: &p})
					if err != nil {
						if rctx.Err() == nil {
							failed.Add(1)
						}
						continue
					}
					written.Add(1)
				}
			})
		}
		relay := &outbox.Relay{DB: db, SQS: &tookSQS{SQS: sq, lat: lat}, Table: "outbox", Logger: slog.New(slog.DiscardHandler), Concurrency: h.cfg.RelayConcurrency,
			OnRound: onRound}
		if mode != RelayOutbox {
			relay.GroupBatch, relay.PerGroup = RelayGroupBatchSize, RelayGroupBatchPerGroup
		}
		wg.Go(func() { _ = relay.Run(rctx) })
	default:
		return run, fmt.Errorf("relay mode %q", mode)
	}
	var qerr error
	snap := func() Sample {
		s := c.sample()
		n, e := reached()
		if e != nil {
			qerr = cmp.Or(qerr, e)
		}
		s.Counts["applied"] = float64(n)
		s.Counts["written"] = float64(written.Load())
		s.Counts["failed"] = float64(failed.Load())
		return s
	}
	err = awaitBusy(ctx, busy, relayFirstSweepLimit)
	if err == nil {
		err = sleep(ctx, h.cfg.Warmup)
	}
	s0 := snap()
	lat.open(true)
	mu.Lock()
	window := max(h.cfg.Window, 3*pass)
	mu.Unlock()
	if err == nil {
		err = sleep(ctx, window)
	}
	s1 := snap()
	lat.open(false)
	cancel()
	wg.Wait()
	if err = cmp.Or(err, qerr); err != nil {
		return run, err
	}
	run.Window = delta(s0, s1)
	run.Seconds = s1.At.Sub(s0.At).Seconds()
	run.Rate = run.Window.Counts["applied"] / run.Seconds
	run.Written = run.Window.Counts["written"]
	run.ProducerErrors = run.Window.Counts["failed"]
	if ds := lat.samples(); len(ds) > 0 {
		ps := Percentiles(ds, 0.5, 0.99)
		run.P50, run.P99 = ps[0], ps[1]
	}
	if mode == RelayBacklog || mode == RelayBacklogGroupBatch {
		run.Writers = 0
		if n := float64(h.relayBacklogSize()); s1.Counts["applied"] >= n {
			return run, fmt.Errorf("relay %s: the backlog of %.0f ran out before the window ended", mode, n)
		}
	}
	h.logf("relay %s, %d groups, %d writers: %.0f msg/s reached SQS (%.0f msg/s written), DynamoDB %.2f req/msg, SQS %.2f req/msg, %.1f WRU/msg",
		mode, groups, writers, run.Rate, run.Written/run.Seconds, perMessage(run.Window, "DynamoDB"), perMessage(run.Window, "SQS"), run.WriteUnits())
	return run, nil
}

// writeToSQS times messages from a producer beginning their write to SQS
// taking them, for the messages SQS takes while it is open.
type writeToSQS struct {
	mu    sync.Mutex
	on    bool
	begun map[string]time.Time // by message body (each is unique), until SQS takes it
	ds    []time.Duration
}

func newWriteToSQS() *writeToSQS { return &writeToSQS{begun: map[string]time.Time{}} }

func (w *writeToSQS) open(on bool) {
	w.mu.Lock()
	w.on = on
	w.mu.Unlock()
}

// began notes that the write of the message of body began at t.
func (w *writeToSQS) began(body string, t time.Time) {
	w.mu.Lock()
	w.begun[body] = t
	w.mu.Unlock()
}

// took records a message whose write began at began and reached SQS at at.
func (w *writeToSQS) took(began, at time.Time) {
	w.mu.Lock()
	if w.on {
		w.ds = append(w.ds, at.Sub(began))
	}
	w.mu.Unlock()
}

// tookBody records the message of body, noted by began, as taken at at:
// once (SQS answers a deduplicated copy as taken too).
func (w *writeToSQS) tookBody(body string, at time.Time) {
	w.mu.Lock()
	began, ok := w.begun[body]
	delete(w.begun, body)
	w.mu.Unlock()
	if ok {
		w.took(began, at)
	}
}

func (w *writeToSQS) samples() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ds)
}

// tookSQS is the relay's SQS, noting what SQS takes of each batch.
type tookSQS struct {
	outbox.SQS
	lat *writeToSQS
}

func (t *tookSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := t.SQS.SendMessageBatch(ctx, in, o...)
	if err != nil {
		return out, err
	}
	now := time.Now()
	bodies := make(map[string]string, len(in.Entries))
	for _, e := range in.Entries {
		bodies[aws.ToString(e.Id)] = aws.ToString(e.MessageBody)
	}
	for _, ok := range out.Successful {
		t.lat.tookBody(bodies[aws.ToString(ok.Id)], now)
	}
	return out, nil
}

// relayFirstSweepLimit bounds the wait for a relay's first sweep that
// published: its idle Poll and a round (which Run bounds at 20 s).
const relayFirstSweepLimit = outbox.DefaultPoll + 20*time.Second

// awaitBusy waits for busy to close, for at most limit.
func awaitBusy(ctx context.Context, busy <-chan struct{}, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-busy:
		return nil
	case <-t.C:
		return fmt.Errorf("relay published nothing within %s", limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WriteUnits is DynamoDB write units per message that reached SQS.
func (r RelayRun) WriteUnits() float64 {
	if n := r.Window.Counts["applied"]; n > 0 {
		return r.Window.Counts["dynamodb_wru"] / n
	}
	return 0
}
