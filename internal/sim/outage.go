package sim

import (
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// DynamoDB outages on Lambda (in a quarter of the worlds, by seed): every
// DynamoDB write of a Lambda invocation (PutItem, UpdateItem,
// TransactWriteItems) fails, as a 5xx after the SDK's retries, for 0.5 to
// 4 s once in every outagePeriod of virtual time. An outage that begins
// after a claim-mode effect's call and ends before the invocation's CommitBy
// (the deadline less a quarter of LeaseMargin) must find the commit still
// being retried: DESIGN.md's window 3 ("the commit gives up") opens only
// when DynamoDB refuses every try until shortly before the deadline. The
// judge (judgeGaveUp) excuses a Lambda commit's give-up only when its next
// try would have passed its deadline; a repeat after any other give-up is a
// violation.

const outagePeriod = 40 * time.Second

// outageWorld reports whether seed's world has DynamoDB outages on Lambda.
func outageWorld(seed uint64) bool { return hash64(seed, "outageworld")%4 == 0 }

// inOutage reports whether p's call of op, now, falls in an outage.
func (w *world) inOutage(p *proc, op string) bool {
	if !outageWorld(w.cfg.Seed) || !strings.HasPrefix(p.id, "λ") {
		return false
	}
	switch op {
	case "PutItem", "UpdateItem", "TransactWriteItems":
	default:
		return false
	}
	t := time.Since(w.start)
	i := uint64(t / outagePeriod)
	period := hash64(w.cfg.Seed, "outage", strconv.FormatUint(i, 10))
	begin := time.Duration(period%uint64(outagePeriod/time.Millisecond)) * time.Millisecond
	length := 500*time.Millisecond + time.Duration((period>>32)%3500)*time.Millisecond
	at := t - time.Duration(i)*outagePeriod
	if at < begin || at >= begin+length {
		return false
	}
	w.stat("outage: a Lambda DynamoDB write failed in an outage", 1)
	return true
}

// judgeGaveUp tells whether a "commit gave up" line of p (r) opens the
// documented window: always for a process that died or a pool worker (a
// forced stop cuts the retries: see Worker.StopAndCancel); for a Lambda
// invocation only when its next try would have passed its deadline (left,
// next: the line's attributes).
func (w *world) judgeGaveUp(p *proc, r slog.Record) bool {
	if p == nil || !strings.HasPrefix(p.id, "λ") || p.dead.Load() {
		return true
	}
	var left, next time.Duration
	var has int
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "left":
			left, has = a.Value.Duration(), has+1
		case "next":
			next, has = a.Value.Duration(), has+1
		}
		return true
	})
	if has < 2 || next > left {
		return true
	}
	w.stat("lambda: commit gave up before its deadline needed it (no documented window)", 1)
	return false
}
