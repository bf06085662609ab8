package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Kind tells what a sent message is.
type Kind int

const (
	// Original is the first send of a deposit.
	Original Kind = iota
	// ExactResend repeats a deposit with its MessageDeduplicationId, inside
	// SQS's five-minute window: SQS itself drops it.
	ExactResend
	// Retry repeats a deposit under a new MessageDeduplicationId with the
	// same idempotency-key and body: a producer retry after SQS's window,
	// which only the dedup ledger catches.
	Retry
	// Poison is a body the ledger rejects: it must end in the DLQ.
	Poison
)

func (k Kind) String() string {
	switch k {
	case Original:
		return "original"
	case ExactResend:
		return "exact-resend"
	case Retry:
		return "retry"
	case Poison:
		return "poison"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Deposit is one logical message: it must be applied exactly once, in its
// group's order.
type Deposit struct {
	Group   string // message group, and the ledger account
	Seq     int64  // 1..n within the group, in send order
	Amount  int64  // cents
	Key     string // idempotency-key attribute
	DedupID string // MessageDeduplicationId of the original send
	SleepMS int64  // >0: the chaos effect sleeps this long before applying
	NoSeq   bool   // the body carries no seq: the ledger does not guard the order
	Body    string
}

// Send is one SendMessage of the producer.
type Send struct {
	Kind    Kind
	Group   string
	DedupID string
	Key     string
	Body    string
	Deposit int // index into Plan.Deposits; -1 for poison
}

// Plan is everything the producer sends, in order, and what must come of it.
type Plan struct {
	Deposits []Deposit
	Sends    []Send
	Groups   []string // deposit groups, sorted
	Poison   []Send
}

// PlanConfig shapes a plan.
type PlanConfig struct {
	Deposits int     // logical messages (N)
	Groups   int     // deposit groups (= accounts)
	ExactPct float64 // percent of deposits resent with the same dedup id
	RetryPct float64 // percent of deposits resent with a new dedup id, same key
	Poison   int     // poison messages, each in its own group
	Sleepers int     // deposits whose effect sleeps SleepMS
	SleepMS  int64
	// NoSeq leaves seq out of the bodies: without the ledger's
	// last_seq < seq condition, an order violation or a double is applied
	// and shows in the entries instead of being refused.
	NoSeq bool
}

// NewPlan builds a plan from cfg with a seeded generator: the same seed gives
// the same plan. Deposits go to random groups; duplicates of a deposit follow
// it later in its group; poison messages sit at random places.
func NewPlan(cfg PlanConfig, seed uint64) Plan {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	groups := max(1, min(cfg.Groups, cfg.Deposits))
	var p Plan
	for g := range groups {
		p.Groups = append(p.Groups, fmt.Sprintf("g%04d", g))
	}
	sleepers := map[int]bool{}
	for len(sleepers) < min(cfg.Sleepers, cfg.Deposits) {
		sleepers[rng.IntN(cfg.Deposits)] = true
	}
	poisonAt := map[int]int{} // send position among deposits -> poison count there
	for range cfg.Poison {
		poisonAt[rng.IntN(cfg.Deposits+1)]++
	}
	seqs := map[string]int64{}
	sent := map[string][]int{} // group -> deposits sent so far
	poison := 0
	addPoison := func(at int) {
		for range poisonAt[at] {
			poison++
			g := fmt.Sprintf("poison%03d", poison)
			// amount_cents is a string: the ledger rejects the body.
			s := Send{Kind: Poison, Group: g, DedupID: "d-" + g, Key: "k-" + g, Deposit: -1,
				Body: fmt.Sprintf(`{"account":%q,"amount_cents":"lots","seq":1}`, g)}
			p.Sends = append(p.Sends, s)
			p.Poison = append(p.Poison, s)
		}
	}
	for i := range cfg.Deposits {
		addPoison(i)
		g := p.Groups[rng.IntN(groups)]
		seqs[g]++
		d := Deposit{Group: g, Seq: seqs[g], Amount: 1 + rng.Int64N(10000), NoSeq: cfg.NoSeq}
		d.Key = fmt.Sprintf("k-%s-%d", g, d.Seq)
		d.DedupID = fmt.Sprintf("d-%s-%d", g, d.Seq)
		if sleepers[i] {
			d.SleepMS = cfg.SleepMS
		}
		d.Body = ledgerBody(d)
		p.Deposits = append(p.Deposits, d)
		sent[g] = append(sent[g], i)
		p.Sends = append(p.Sends, Send{Kind: Original, Group: g, DedupID: d.DedupID, Key: d.Key, Body: d.Body, Deposit: i})
		// Duplicates of this deposit or of an earlier one of its group.
		if rng.Float64()*100 < cfg.ExactPct {
			j := pick(rng, sent[g])
			dj := p.Deposits[j]
			p.Sends = append(p.Sends, Send{Kind: ExactResend, Group: g, DedupID: dj.DedupID, Key: dj.Key, Body: dj.Body, Deposit: j})
		}
		if rng.Float64()*100 < cfg.RetryPct {
			j := pick(rng, sent[g])
			dj := p.Deposits[j]
			p.Sends = append(p.Sends, Send{Kind: Retry, Group: g, DedupID: fmt.Sprintf("%s-retry%d", dj.DedupID, len(p.Sends)),
				Key: dj.Key, Body: dj.Body, Deposit: j})
		}
	}
	addPoison(cfg.Deposits)
	var used []string
	for _, g := range p.Groups {
		if seqs[g] > 0 {
			used = append(used, g)
		}
	}
	p.Groups = used
	return p
}

// pick prefers recent deposits: a producer retries what it just sent.
func pick(rng *rand.Rand, idx []int) int {
	n := min(len(idx), 5)
	return idx[len(idx)-1-rng.IntN(n)]
}

func ledgerBody(d Deposit) string {
	m := map[string]any{"account": d.Group, "amount_cents": d.Amount}
	if !d.NoSeq {
		m["seq"] = d.Seq
	}
	if d.SleepMS > 0 {
		m["sleep_ms"] = d.SleepMS
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Count returns how many sends are of kind k.
func (p Plan) Count(k Kind) int {
	n := 0
	for _, s := range p.Sends {
		if s.Kind == k {
			n++
		}
	}
	return n
}

// Sleepers returns the number of deposits whose effect sleeps.
func (p Plan) Sleepers() int {
	n := 0
	for _, d := range p.Deposits {
		if d.SleepMS > 0 {
			n++
		}
	}
	return n
}
