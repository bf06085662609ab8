package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The sequencer makes a seed replay: the Go runtime, not the seed, decides
// which goroutine runs first among those that wake at the same virtual
// instant (three workers' long polls woken by one send, two lanes finishing
// together, a frozen process's goroutines thawing at once), and so the
// order in which their calls reach the fakes. Every call that reaches the
// shared world (the fakes, the injector's attempt counts, what the
// simulation observes) first takes a step: it sleeps a latency drawn from
// the seed and the call's identity (who makes it, the operation, its
// subject, and how many such calls came before), from 1 ns to seqSpread.
// Calls that arrive together then reach the world at instants of their
// own, one at a time, in an order the seed fixes: synctest wakes the one
// with the earliest instant only when every other goroutine of the bubble
// is durably blocked, and it runs alone until it blocks again (at its next
// step, or anywhere else). A call's latency is a network's, at most 65 µs:
// nothing the product or the judgements time is that fine.
//
// Two steps drawn to the same nanosecond would wake together, in the
// runtime's order: all but one of them (the least by a hash of their
// identities, a choice the seed fixes) sleep again (sleep). The product
// takes steps of its own where goroutines of one process that one event
// wakes would race (exactly.TestConfig.Step: a lane about to take a
// handler's slot, the batcher about to send, the keeper about to extend).
// docs/TESTING.md ("What a seed fixes") has the figures.
type sequencer struct {
	seed uint64
	mu   sync.Mutex
	n    map[string]int // identity -> steps taken
	// at: the steps asleep until an instant (virtual UnixNano): the ones
	// that meet there, and how many of them have woken.
	at map[int64]*meeting
	// Config.LogSteps (debugging a replay): every step, as it is taken.
	logOn bool
	log   []string
	// rec is every step, in the order taken (Result.Record: what a
	// recording keeps); want, when replaying one, the recorded steps,
	// and div the first step taken that is not the recorded one.
	start time.Time
	rec   []Step
	want  []Step
	div   *Divergence
}

// Step is one decision of the sequencer: the call ID (step's identity)
// reached the world, after waiting on its way for What when not "", At
// after the run began.
type Step struct {
	At       time.Duration
	ID, What string
}

func (s Step) String() string {
	if s.ID == "" {
		return "(no step)"
	}
	out := fmt.Sprintf("+%s %s", s.At, s.ID)
	if s.What != "" {
		out += " after " + s.What
	}
	return out
}

// Divergence is where a replay left its recording: the first step taken
// (Asked) that is not the recorded one (Recorded), by index. A zero
// Asked: the run ended before the recording did; a zero Recorded: it
// went on past it.
type Divergence struct {
	Index           int
	Recorded, Asked Step
}

func (d Divergence) String() string {
	return fmt.Sprintf("step %d: recorded %s, asked %s", d.Index, d.Recorded, d.Asked)
}

// seqSpread bounds a step's latency.
const seqSpread = 1 << 16 // ns

func newSequencer(cfg Config) *sequencer {
	if cfg.Unsequenced {
		return nil
	}
	return &sequencer{seed: cfg.Seed, n: map[string]int{}, at: map[int64]*meeting{}, logOn: cfg.LogSteps,
		start: time.Now(), want: cfg.Want}
}

// record returns the steps taken and, when replaying, where the run left
// the recording (nil: it took every recorded step, and no other).
func (s *sequencer) record() ([]Step, *Divergence) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	div := s.div
	if div == nil && s.want != nil && len(s.rec) < len(s.want) {
		div = &Divergence{Index: len(s.rec), Recorded: s.want[len(s.rec)]}
	}
	return s.rec, div
}

// step waits the latency of who's next call of op on subject (nothing
// when the sequencer is off), and returns the call's identity, for then.
func (s *sequencer) step(who, op, subject string) string {
	if s == nil {
		return ""
	}
	id := who + "|" + op + "|" + subject
	s.mu.Lock()
	s.n[id]++
	n := s.n[id]
	s.mu.Unlock()
	id += "#" + strconv.Itoa(n)
	s.sleep(id, "")
	return id
}

// then orders a call again where it waited on its way (what: a freeze, a
// pause, a slow answer): the goroutines of a frozen process thaw at the
// same instant. call is step's identity, unique: no count is needed, and
// none could be kept, since calls that thaw together arrive in the
// runtime's order.
func (s *sequencer) then(call, what string) {
	if s == nil {
		return
	}
	s.sleep(call, what)
}

// meeting is the steps drawn to one instant.
type meeting struct {
	steps []string
	woken int
}

// sleep waits a latency drawn from the step's identity. Steps drawn to the
// same instant each see who else is there when they wake (every one of
// them came to sleep before that instant: a latency is at least 1 ns), and
// all but the least by hash64 draw again, so that they go one at a time in
// the seed's order, not the runtime's.
func (s *sequencer) sleep(id, what string) {
	key := id + "\x00" + what
	d := time.Duration(1 + hash64(s.seed, id, what)%seqSpread)
	for round := 1; ; round++ {
		at := time.Now().Add(d).UnixNano()
		s.mu.Lock()
		m := s.at[at]
		if m == nil {
			m = &meeting{}
			s.at[at] = m
		}
		m.steps = append(m.steps, key)
		s.mu.Unlock()
		time.Sleep(d)
		s.mu.Lock()
		m.woken++
		if m.woken == len(m.steps) {
			delete(s.at, at)
		}
		first := true
		mine := hash64(s.seed, key)
		for _, o := range m.steps {
			if h := hash64(s.seed, o); h < mine || h == mine && o < key {
				first = false
				break
			}
		}
		s.mu.Unlock()
		if first {
			break
		}
		d = time.Duration(1 + hash64(s.seed, key, "again", strconv.Itoa(round))%seqSpread)
	}
	s.mu.Lock()
	st := Step{At: time.Since(s.start), ID: id, What: what}
	if i := len(s.rec); s.want != nil && s.div == nil {
		if i >= len(s.want) {
			s.div = &Divergence{Index: i, Asked: st}
		} else if s.want[i] != st {
			s.div = &Divergence{Index: i, Recorded: s.want[i], Asked: st}
		}
	}
	s.rec = append(s.rec, st)
	if s.logOn {
		s.log = append(s.log, time.Now().Format("15:04:05.000000000")+" "+id+" "+what)
	}
	s.mu.Unlock()
}

// callID is a call's identity, carried in its context to the fake SQS: a
// long poll that wakes takes a step under it (memsqs.WithWake).
type callID struct{ who, op, subject string }

type callIDKey struct{}

func withCallID(ctx context.Context, who, op, subject string) context.Context {
	return context.WithValue(ctx, callIDKey{}, callID{who, op, subject})
}

// woke is the fake SQS's hook: a long poll woke, and steps before it looks
// at its queue again.
func (s *sequencer) woke(ctx context.Context) {
	if s == nil {
		return
	}
	if c, ok := ctx.Value(callIDKey{}).(callID); ok {
		s.step(c.who, c.op+" woke", c.subject)
		return
	}
	s.step("?", "poll woke", "") // every long poll of the simulation carries its call's identity
}

// leastLid names a batch call by the smallest logical id among its
// entries, not by its first entry: the product builds some batches in an
// order no seed fixes (the keeper's extensions come from a map), and a
// call's fault must not depend on it. A batch's entry fails (Partial) by
// its own logical id for the same reason.
func leastLid(lids []string) string {
	best, bn := "", -1
	for _, l := range lids {
		n, err := strconv.Atoi(l)
		if err != nil {
			if bn < 0 && (best == "" || l < best) {
				best = l
			}
			continue
		}
		if bn < 0 || n < bn {
			best, bn = l, n
		}
	}
	return best
}

// inLidOrder returns the receipt handles of a delete batch's entries by
// logical id (then message id), as the stories record them: the product
// queues a batch's deletes in the order its lanes finish, which the seed
// does not fix. lids are all's logical ids; entries is the part sent.
func inLidOrder(entries []types.DeleteMessageBatchRequestEntry, lids []string, all []types.DeleteMessageBatchRequestEntry) []string {
	lidOf := map[string]int{}
	for i, e := range all {
		n, err := strconv.Atoi(lids[i])
		if err != nil {
			n = -1
		}
		lidOf[aws.ToString(e.ReceiptHandle)] = n
	}
	hs := make([]string, len(entries))
	for i, e := range entries {
		hs[i] = aws.ToString(e.ReceiptHandle)
	}
	sort.SliceStable(hs, func(i, j int) bool {
		if a, b := lidOf[hs[i]], lidOf[hs[j]]; a != b {
			return a < b
		}
		return receiptID(hs[i]) < receiptID(hs[j])
	})
	return hs
}
