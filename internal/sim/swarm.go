package sim

import (
	"fmt"
	"strings"
	"time"
)

// shape is the world's shape for one seed (swarm testing, as TigerBeetle's
// simulator does): each seed draws its own corner of the space of settings,
// faults and workloads, so that a budget of seeds explores many corners
// rather than one deeply. Every invariant holds in every shape. With
// Config.Swarm off, the shape is the fixed world of before (fixedShape).
type shape struct {
	Rate  float64       // probability that a call gets a fault (unless RATE= is given)
	Kinds map[Kind]bool // fault kinds enabled (unless FAULTS= is given)
	Ops   map[string]bool

	Q1QueueScoped   bool          // Q1 deduplicates per queue (high throughput, per group, otherwise)
	Vis1            time.Duration // Q1's visibility timeout (Q2's is 6× the Lambda timeout, 30 s)
	Concurrency     int           // a pool Worker's Config.Concurrency
	Receivers       int           // Config.Receivers
	MaxInFlight     int           // Config.MaxInFlight (0: the default): how many a receive asks for
	AckDelay        time.Duration // Config.AckDelay (0: the default)
	RetryInPlace    int           // Config.RetryInPlace (-1: none)
	GroupWindow     time.Duration // Config.GroupCommit of the group-commit incarnations
	ShutdownTimeout time.Duration // Config.ShutdownTimeout (0: the default)
	LambdaBatch     int           // the event source mapping's batch size
	FailRest        string        // Config.Lambda.FailRest
	Payload         string        // Config.PayloadHash
	MixedPayload    bool          // each process draws its own PayloadHash (modes.go)
	Carried         bool          // Q1 commits in carried mode (modes.go)
	Pad             int           // bytes of padding in every body (message sizes)
	Burst           bool          // Q2's groups sent in bursts, its downstream failing retryably at first
	Graceful        bool          // some incarnations stop gracefully (Worker.Stop) while holding messages
	Outbox          obShape       // the outbox half (outboxworld.go)
	Q1Std, Q2Std    bool          // the queue (and its DLQ) is a standard queue, not a FIFO one (standard.go)
	Limits          bool          // commits at, under and over DynamoDB's limits (limits.go)
}

// fixedShape is the world without swarm: the settings of before.
func fixedShape(cfg Config) shape {
	return shape{Rate: cfg.Rate, Kinds: cfg.Kinds, Ops: cfg.Ops, Vis1: visibility, Concurrency: 4, Receivers: 1,
		RetryInPlace: 1, GroupWindow: 300 * time.Millisecond, LambdaBatch: 10, FailRest: "group", Payload: "body"}
}

// drawShape draws the seed's shape. Fault settings the command line fixes
// (cfg.Fixed*) are kept.
func drawShape(cfg Config) shape {
	s := fixedShape(cfg)
	if !cfg.Swarm {
		return s
	}
	pick := func(name string, n int) int { return int(hash64(cfg.Seed, "shape", name) % uint64(n)) }
	if !cfg.FixedRate {
		s.Rate = []float64{0.01, 0.02, 0.04, 0.04, 0.06}[pick("rate", 5)]
	}
	if !cfg.FixedKinds {
		s.Kinds = map[Kind]bool{}
		for k := Fail; k < numKinds; k++ {
			if cfg.Kinds[k] && pick("kind "+k.String(), 4) != 0 { // each kind on in 3 seeds of 4
				s.Kinds[k] = true
			}
		}
		if len(s.Kinds) == 0 {
			s.Kinds[Fail] = true
		}
	}
	if !cfg.FixedOps {
		s.Ops = map[string]bool{}
		for op := range cfg.Ops {
			if pick("op "+op, 5) != 0 { // each operation faulted in 4 seeds of 5
				s.Ops[op] = true
			}
		}
	}
	s.Q1QueueScoped = pick("q1 scope", 3) == 0
	s.Vis1 = []time.Duration{30 * time.Second, 30 * time.Second, 60 * time.Second}[pick("vis1", 3)]
	s.Concurrency = []int{1, 4, 4, 10}[pick("concurrency", 4)]
	s.Receivers = []int{1, 1, 2}[pick("receivers", 3)]
	s.MaxInFlight = []int{0, 0, 1, 3}[pick("inflight", 4)]
	s.AckDelay = []time.Duration{0, time.Millisecond, 500 * time.Millisecond}[pick("ack", 3)]
	s.RetryInPlace = []int{-1, 1, 1, 3}[pick("inplace", 4)]
	s.GroupWindow = []time.Duration{20 * time.Millisecond, 300 * time.Millisecond, time.Second}[pick("window", 3)]
	s.ShutdownTimeout = []time.Duration{0, 0, 3 * time.Second}[pick("shutdown", 3)]
	s.LambdaBatch = []int{1, 4, 10, 10}[pick("batch", 4)]
	s.FailRest = []string{"group", "group", "batch"}[pick("failrest", 3)]
	s.Payload = payloadKinds[pick("payload", 2)]
	s.MixedPayload = pick("payload mixed", 6) == 0
	s.Carried = carriedWorld(cfg.Seed)
	if pick("big", 8) == 0 {
		// Bodies from 1 KiB up to 200 KiB, under SQS's 256 KiB with room
		// for the attributes a DLQ copy adds; in one seed of 8 (they cost
		// CPU: every copy is hashed and parsed), half of them past 16 KiB.
		if pick("bigger", 2) == 0 {
			s.Pad = 1024 + pick("pad", 15*1024)
		} else {
			s.Pad = 16*1024 + pick("pad", 184*1024)
		}
	}
	s.Burst = pick("burst", 3) == 0
	s.Graceful = pick("graceful", 2) == 0
	s.Outbox = drawOutbox(pick)
	if s.Outbox.PagesBig {
		s.Payload = "body" // 80 bodies of 256 KiB, each parsed at every delivery otherwise: CPU
	}
	s.Limits = pick("limits", 8) == 0
	s.Carried = s.Carried && !s.Limits // the limits' commit classes count a record item of their own
	// The outbox half's judgements (a group published and applied in write
	// order, a held group) rest on FIFO queues: its worlds keep both FIFO.
	s.Q1Std = pick("q1 standard", 4) == 0 && !s.Outbox.On
	s.Q2Std = pick("q2 standard", 4) == 0 && !s.Outbox.On
	return s
}

// maxVis is the longest visibility timeout of the world's queues: a Slow
// or Pause fault stalls past it.
func (s shape) maxVis() time.Duration { return max(s.Vis1, visibility) }

// choices lists the shape's choices, one "name=value" each: counted per seed
// in the summary and printed with a red seed.
func (s shape) choices() []string {
	size := "small"
	switch {
	case s.Pad >= 16*1024:
		size = "16-200KiB"
	case s.Pad > 0:
		size = "1-16KiB"
	}
	var ks []string
	for k := Fail; k < numKinds; k++ {
		if s.Kinds[k] {
			ks = append(ks, k.String())
		}
	}
	return append([]string{
		fmt.Sprintf("rate=%g", s.Rate),
		fmt.Sprintf("kinds=%d of %d", len(ks), int(numKinds)-1),
		fmt.Sprintf("ops faulted=%d of %d", len(s.Ops), len(Ops)),
		fmt.Sprintf("q1 type=%s", map[bool]string{true: "standard", false: "FIFO"}[s.Q1Std]),
		fmt.Sprintf("q2 type=%s", map[bool]string{true: "standard", false: "FIFO"}[s.Q2Std]),
		fmt.Sprintf("q1 dedup scope=%s", map[bool]string{true: "queue", false: "messageGroup"}[s.Q1QueueScoped || s.Q1Std]),
		fmt.Sprintf("q1 visibility=%s", s.Vis1),
		fmt.Sprintf("concurrency=%d", s.Concurrency),
		fmt.Sprintf("receivers=%d", s.Receivers),
		fmt.Sprintf("max in flight=%d", s.MaxInFlight),
		fmt.Sprintf("ack delay=%s", s.AckDelay),
		fmt.Sprintf("retry in place=%d", s.RetryInPlace),
		fmt.Sprintf("group commit window=%s", s.GroupWindow),
		fmt.Sprintf("shutdown timeout=%s", s.ShutdownTimeout),
		fmt.Sprintf("lambda batch=%d", s.LambdaBatch),
		fmt.Sprintf("fail rest=%s", s.FailRest),
		fmt.Sprintf("payload hash=%s", map[bool]string{true: "mixed", false: s.Payload}[s.MixedPayload]),
		fmt.Sprintf("q1 commit=%s", map[bool]string{true: "carried", false: "by incarnation"}[s.Carried]),
		fmt.Sprintf("message size=%s", size),
		fmt.Sprintf("bursts=%v", s.Burst),
		fmt.Sprintf("graceful stops=%v", s.Graceful),
		fmt.Sprintf("DynamoDB limits=%v", s.Limits),
	}, s.Outbox.choices()...)
}

// String is the shape of a red seed, on one line.
func (s shape) String() string {
	var ks []string
	for k := Fail; k < numKinds; k++ {
		if s.Kinds[k] {
			ks = append(ks, k.String())
		}
	}
	return strings.Join(s.choices(), ", ") + fmt.Sprintf(" (kinds %s; pad %d bytes)", strings.Join(ks, ","), s.Pad)
}

// flakyFirst: in a shape with bursts, about a third of Q2's messages find
// the downstream unavailable (a retryable failure) at their first call.
func (w *world) flakyFirst(s *msgSpec) bool {
	if !w.shape.Burst || hash64(w.cfg.Seed, "flaky", fmt.Sprint(s.lid))%3 != 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flaked == nil {
		w.flaked = map[int]bool{}
	}
	if w.flaked[s.lid] {
		return false
	}
	w.flaked[s.lid] = true
	w.stats["downstream: failed retryably (bursts)"]++
	return true
}
