package sim

import (
	"context"
	"sync"
	"time"

	"github.com/exactlyonce/exactly"
)

// A forced stop across a commit. Worker.StopAndCancel (and the end of
// ShutdownTimeout) cancels the running effects' contexts; a claim-mode
// commit already under way is still tried once (DESIGN.md's first window:
// released only when that one try fails), so that an effect that finished
// is not run again. A stop drawn at a random time rarely lands between a
// finished effect and its commit, so in a third of the worlds one pool
// worker is stopped exactly there: at its k-th claim-mode commit of Q2
// (k drawn from the seed), the world calls StopAndCancel on the process's
// workers and lets the stop cancel what it cancels before the commit's
// request goes out. The commit must still reach DynamoDB; one that fails
// on its own cancelled context was never tried, its claim is released and
// the next delivery calls the downstream again outside every documented
// window (judged by world.go: downstream and outage.go: judgeGaveUp).

// forcedStopWorld reports whether seed's world stops a worker across a
// commit, and at which of Q2's pool commits (1-based).
func forcedStopWorld(seed uint64) (bool, int) {
	return hash64(seed, "forced stop world")%3 == 0, 1 + int(hash64(seed, "forced stop at")%8)
}

// stopAtCommit is called as p makes a claim-mode commit of key: when it is
// the world's chosen commit, p's workers are stopped as StopAndCancel
// stops them, and the commit goes on once the stop has cancelled the
// running contexts.
func (w *world) stopAtCommit(p *proc, key string) {
	on, at := forcedStopWorld(w.cfg.Seed)
	if !on || p.stopNow == nil || p.isDead() {
		return
	}
	if s := w.byKey[key]; s == nil || s.queue != q2Name {
		return
	}
	w.mu.Lock()
	w.q2Commits++
	chosen := w.q2Commits == at
	w.mu.Unlock()
	if !chosen {
		return
	}
	w.stat("world: forced stops across a claim-mode commit", 1)
	stop := p.stopNow
	w.wg.Go(stop)
	// The stop cancels the contexts at once and then waits for the drain,
	// this commit included: let it cancel before the request goes out.
	time.Sleep(time.Millisecond)
}

// forcedStop returns p's StopAndCancel: every worker of the process is
// stopped at once, the running effects' contexts cancelled, and the
// process exits once they have drained; the next incarnation starts as
// after a graceful stop (exited).
func (w *world) forcedStop(ctx context.Context, p *proc, slot, inc int, workers func() []*exactly.Worker) func() {
	return func() {
		if p.isDead() {
			return
		}
		var wg sync.WaitGroup
		for _, wk := range workers() {
			wg.Go(func() { _ = wk.StopAndCancel(context.Background()) })
		}
		wg.Wait()
		w.exited(ctx, p, slot, inc)
	}
}
