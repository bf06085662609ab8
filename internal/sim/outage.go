package sim

import (
	"context"
	"errors"
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
	if !outageWorld(w.cfg.Seed) || !strings.HasPrefix(p.id, "λ") || !w.inj.OpsOn[op] || !w.inj.Kinds[Fail] {
		return false // FAULTS= and OPS= restrict outages too
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
	w.stat("path: a Lambda DynamoDB write failed in an outage", 1)
	return true
}

// judgeGaveUp tells whether a "commit gave up" line of p (r) opens the
// documented window. Always for a process that died. For a pool worker, a
// give-up before its deadline is a forced stop's (DESIGN.md's first
// window: the commit under way is tried once, and released when that try
// fails), but only if that try reached DynamoDB: one that failed on its
// own cancelled context was never made, and the repeat it leads to is no
// window. For a Lambda invocation (no forced stop), only when its next try
// would have passed its deadline (the line's reason "deadline"; "stopped"
// when the wait for it was cut).
func (w *world) judgeGaveUp(p *proc, r slog.Record) bool {
	if p == nil || p.dead.Load() {
		return true
	}
	var reason string
	var cause error
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "reason":
			reason = a.Value.String()
		case "err":
			cause, _ = a.Value.Any().(error)
		}
		return true
	})
	if errors.Is(cause, context.Canceled) {
		w.stat("sim: commit gave up on its own cancelled context: never tried (no documented window)", 1)
		return false
	}
	if reason != "stopped" {
		return true
	}
	if !strings.HasPrefix(p.id, "λ") {
		w.stat("sim: commit tried once at a forced stop, failed, released (DESIGN.md's first window)", 1)
		return true
	}
	w.stat("lambda: commit gave up before its deadline needed it (no documented window)", 1)
	return false
}
