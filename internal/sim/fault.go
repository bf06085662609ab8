// Package sim is a deterministic simulation of the worker: the real pool,
// processor, dedup store, Lambda handler and redrive run against the
// in-memory SQS and DynamoDB inside a testing/synctest bubble (virtual time),
// with a seeded fault injector between the code and the fakes. It is a test
// package: `make sim` runs it (see docs/TESTING.md).
package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go"
)

// Kind is a kind of injected fault.
type Kind int

const (
	None       Kind = iota
	Fail            // fails before taking effect: 5xx or throttling after the SDK's retries
	Timeout         // fails before taking effect: a timeout or a connection reset
	Lost            // takes effect, its response is lost
	Partial         // batch call: some entries fail (the others take effect)
	Conflict        // transaction cancelled with TransactionConflict (no effect)
	Slow            // takes effect, its response comes back past a lease / visibility timeout
	Pause           // the calling goroutine stalls past a lease / visibility timeout before the call (a zombie)
	Crash           // the process dies at this call, before it takes effect
	CrashAfter      // the call takes effect, then the process dies before it sees the answer
	Freeze          // the whole process stops (every goroutine at its next call or answer) past a lease / visibility timeout, then resumes (fence.go)
	numKinds
)

var kindNames = [...]string{"none", "fail", "timeout", "lost", "partial", "conflict", "slow", "pause", "crash", "crash-after", "freeze"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKinds parses a comma-separated list of kind names ("" or "all": all).
func ParseKinds(s string) (map[Kind]bool, error) {
	out := map[Kind]bool{}
	if s == "" || s == "all" {
		for k := Fail; k < numKinds; k++ {
			out[k] = true
		}
		return out, nil
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for k := Fail; k < numKinds; k++ {
			if k.String() == name {
				out[k], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown fault kind %q (want %s)", name, strings.Join(kindNames[1:], ","))
		}
	}
	return out, nil
}

// Ops are the operations the injector knows; OPS= restricts faults to some.
var Ops = []string{
	"ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage", "SendMessageBatch",
	"PutItem", "UpdateItem", "TransactWriteItems", "Effect",
	// The chain's (chain.go): the outbox's reads and the relay's.
	"GetItem", "Query", "BatchGetItem", "DeleteItem", "DeleteMessage", "ChangeMessageVisibility",
	// The chain's topic worlds' relays (chain_topic.go).
	"PublishBatch",
	// A Lambda container's start-up and first-event reads, and what
	// exactly.SQS has besides (nothing in the simulation calls them yet).
	"GetQueueUrl", "GetQueueAttributes", "DescribeTable", "DescribeTimeToLive",
}

// ParseOps parses a comma-separated list of operations ("" or "all": all).
func ParseOps(s string) (map[string]bool, error) {
	out := map[string]bool{}
	if s == "" || s == "all" {
		for _, o := range Ops {
			out[o] = true
		}
		return out, nil
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Ops, name) {
			return nil, fmt.Errorf("unknown operation %q (want %s)", name, strings.Join(Ops, ","))
		}
		out[name] = true
	}
	return out, nil
}

// kindsFor lists the kinds that make sense for an operation.
func kindsFor(op string) []Kind {
	switch op {
	case "ReceiveMessage":
		return []Kind{Fail, Timeout, Lost, Slow, Pause, Crash, CrashAfter, Freeze}
	case "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessageBatch", "BatchGetItem", "PublishBatch":
		return []Kind{Fail, Timeout, Lost, Partial, Slow, Pause, Crash, CrashAfter, Freeze}
	case "Effect": // the claim-mode effect's downstream call
		return []Kind{Fail, Pause, Crash, CrashAfter, Freeze}
	case "TransactWriteItems":
		return []Kind{Fail, Timeout, Lost, Conflict, Slow, Pause, Crash, CrashAfter, Freeze}
	}
	return []Kind{Fail, Timeout, Lost, Slow, Pause, Crash, CrashAfter, Freeze}
}

// Fault is one injected fault: where (the call's stable identity) and what.
type Fault struct {
	ID   string // op|subject|attempt
	Kind Kind
	At   time.Duration // virtual time since the start of the run
	Proc string        // the process that made the call
}

func (f Fault) String() string {
	return fmt.Sprintf("%-11s %s (by %s at +%s)", f.Kind, f.ID, f.Proc, f.At.Round(time.Millisecond))
}

// Injector decides the fault of each call from a hash of (seed, the call's
// identity, its attempt count), never from a shared random sequence: the
// scheduling of goroutines does not change which faults happen.
type Injector struct {
	Seed     uint64
	Rate     float64 // probability that a call gets a fault
	Kinds    map[Kind]bool
	OpsOn    map[string]bool
	Disabled map[string]bool // fault IDs switched off (shrinking)
	Only     map[string]bool // when set, only these fault IDs may fire (shrinking)
	start    time.Time
	stall    time.Duration // Slow and Pause stall past this (the longest visibility timeout)
	healed   atomic.Bool   // the fault phase is over: no call gets a fault (tail.go)

	mu       sync.Mutex
	attempts map[string]int
	injected []Fault
	counts   map[Kind]int
}

func newInjector(seed uint64, rate float64, kinds map[Kind]bool, ops map[string]bool, only map[string]bool) *Injector {
	return &Injector{Seed: seed, Rate: rate, Kinds: kinds, OpsOn: ops, Only: only,
		start: time.Now(), attempts: map[string]int{}, counts: map[Kind]int{}}
}

// hash64 hashes the seed and parts.
func hash64(seed uint64, parts ...string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	_, _ = h.Write(b[:])
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	// fnv's low bits mix poorly: finalise (splitmix64).
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func unit(x uint64) float64 { return float64(x>>11) / float64(1<<53) }

// decide returns the fault for a call of op on subject by proc. Each call of
// the same (op, subject) counts as a further attempt.
func (in *Injector) decide(op, subject, proc string) (Kind, string) {
	in.mu.Lock()
	base := op + "|" + subject
	in.attempts[base]++
	n := in.attempts[base]
	in.mu.Unlock()
	id := fmt.Sprintf("%s|%d", base, n)
	if in.healed.Load() || !in.OpsOn[op] || in.Disabled[id] || (in.Only != nil && !in.Only[id]) {
		return None, id
	}
	x := hash64(in.Seed, id)
	if unit(x) >= in.Rate {
		return None, id
	}
	var ks []Kind
	for _, k := range kindsFor(op) {
		if in.Kinds[k] {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return None, id
	}
	k := ks[hash64(in.Seed, id, "kind")%uint64(len(ks))]
	in.record(Fault{ID: id, Kind: k, At: time.Since(in.start), Proc: proc})
	return k, id
}

// entryFails decides whether one entry of a batch call with a Partial fault fails.
func (in *Injector) entryFails(id, entry string) bool {
	return hash64(in.Seed, id, entry, "entry")%2 == 0
}

// delay is how long a Slow or Pause fault stalls: past the lease and the
// visibility timeout of the queues (30 s), up to two of them.
func (in *Injector) delay(id string) time.Duration {
	stall := in.stall
	if stall == 0 {
		stall = visibility
	}
	return stall + time.Second + time.Duration(hash64(in.Seed, id, "delay")%uint64(stall))
}

func (in *Injector) record(f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.injected = append(in.injected, f)
	in.counts[f.Kind]++
}

// Injected returns the faults injected so far, in order.
func (in *Injector) Injected() []Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := slices.Clone(in.injected)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// errors the injector returns: API errors the SDK would surface after its retries.
func apiErr(op string, k Kind) error {
	switch k {
	case Timeout:
		return fmt.Errorf("operation error %s: https response error: read tcp: connection reset by peer (sim: %s)", op, k)
	case Lost:
		return fmt.Errorf("operation error %s: request canceled, context deadline exceeded (sim: response lost)", op)
	}
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "sim: throttled past the SDK's retries (" + k.String() + ")", Fault: smithy.FaultServer}
}

// errDead is what a process gets from every call once it has died.
var errDead = errors.New("sim: process is dead")
