package bench

import (
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
)

// states times where a message's time goes in a consumer on the fakes
// (aws regime): from its receive's answer to the start of its effect,
// and from the end of its effect to the DeleteMessageBatch that deletes
// it. The latency layer adds how long each operation's calls were held
// (exactly_bench_held_seconds_total): over a window, that divided by the
// window's length is how many calls of the operation were under way on
// average (receives, transactions).
type states struct {
	mu       sync.Mutex
	received map[string]time.Time // message id -> its receive's answer
	ended    map[string]time.Time // message id -> end of its effect
	idOf     map[string]string    // receipt handle -> message id

	startSum, startN, deleteSum, deleteN prometheus.Counter
}

func newStates(reg prometheus.Registerer) *states {
	c := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "exactly", Name: name, Help: help})
		reg.MustRegister(v)
		return v
	}
	return &states{
		received: map[string]time.Time{}, ended: map[string]time.Time{}, idOf: map[string]string{},
		startSum:  c("bench_start_wait_seconds_total", "time from a message's receive to the start of its effect"),
		startN:    c("bench_start_waits_total", "waits counted in exactly_bench_start_wait_seconds_total"),
		deleteSum: c("bench_delete_wait_seconds_total", "time from the end of a message's effect to its DeleteMessageBatch"),
		deleteN:   c("bench_delete_waits_total", "waits counted in exactly_bench_delete_wait_seconds_total"),
	}
}

// receivedNow records the messages of a receive's answer.
func (s *states) receivedNow(ms []sqstypes.Message) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		id := aws.ToString(m.MessageId)
		s.received[id] = now
		s.idOf[aws.ToString(m.ReceiptHandle)] = id
	}
}

// start records the start of a message's effect.
func (s *states) start(id string) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	at, ok := s.received[id]
	delete(s.received, id)
	s.mu.Unlock()
	if ok {
		s.startSum.Add(now.Sub(at).Seconds())
		s.startN.Inc()
	}
}

// end records the end of a message's effect.
func (s *states) end(id string) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	s.ended[id] = now
	s.mu.Unlock()
}

// deleting records a DeleteMessageBatch as it is sent.
func (s *states) deleting(entries []sqstypes.DeleteMessageBatchRequestEntry) {
	if s == nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		r := aws.ToString(e.ReceiptHandle)
		id, ok := s.idOf[r]
		delete(s.idOf, r)
		at, ended := s.ended[id]
		delete(s.ended, id)
		if ok && ended {
			s.deleteSum.Add(now.Sub(at).Seconds())
			s.deleteN.Inc()
		}
	}
}

// StartWait is the mean time from a message's receive to its effect's
// start in the window (aws regime); 0 if not measured.
func (r Drain) StartWait() time.Duration {
	return meanSeconds(r.Window, "start_wait_seconds", "start_waits")
}

// DeleteWait is the mean time from the end of a message's effect (its
// writes built, before the commit) to its DeleteMessageBatch (aws regime).
func (r Drain) DeleteWait() time.Duration {
	return meanSeconds(r.Window, "delete_wait_seconds", "delete_waits")
}

// UnderWay is how many calls of "Service.Operation" were held by the
// latency layer at once, on average over the window (aws regime).
func (r Drain) UnderWay(op string) float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return r.Window.Counts[heldKey(op)] / r.Seconds
}

// Took is how long a call of "Service.Operation" was held on average in
// the window, the layer's lateness included (on a loaded machine a timer
// fires late): the modelled latency is Base's.
func (r Drain) Took(op string) time.Duration {
	if n := r.Window.Requests[op]; n > 0 {
		return time.Duration(float64(time.Second) * r.Window.Counts[heldKey(op)] / n)
	}
	return 0
}

func heldKey(op string) string { return "held_seconds:" + op }

func meanSeconds(s Sample, sum, n string) time.Duration {
	if c := s.Counts[n]; c > 0 {
		return time.Duration(float64(time.Second) * s.Counts[sum] / c)
	}
	return 0
}

// statesTable is where a message's time goes in the aws regime's
// saturated runs.
func (r *Result) statesTable() *table {
	t := &table{head: []string{"consumer", "conc/proc", "msg/s", "receives under way", "transactions under way", "× conc", "a transaction took", "receive → effect start", "effect end → delete sent", "msgs/receive"}}
	for _, d := range r.Drains() {
		if d.regime() != RegimeAWS || d.StartWait() == 0 {
			continue
		}
		tx := d.UnderWay("DynamoDB.TransactWriteItems")
		t.add(label(d.Consumer, d.Procs), fmt.Sprint(d.Conc), fmt.Sprintf("%.0f", d.Rate),
			fmt.Sprintf("%.1f", d.UnderWay("SQS.ReceiveMessage")), fmt.Sprintf("%.1f", tx), fmt.Sprintf("%.2f", tx/float64(d.Conc)),
			msf(d.Took("DynamoDB.TransactWriteItems")), msf(d.StartWait()), msf(d.DeleteWait()), d.perReceive())
	}
	return t
}
