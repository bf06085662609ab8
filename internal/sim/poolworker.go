package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
)

// startWorker starts incarnation inc of pool worker slot: a process that
// runs two exactly.Workers, built by exactly.New with the process's faulty
// clients, one per source queue: Q1's ledger effect (effect.WritesOnly),
// committed optimistically on about half of the incarnations (hash of seed
// and process; half of those in groups, three in four in the seeds with
// DynamoDB's limits: limits.go) and in transactional mode on the rest, so
// that a run mixes the modes on one table and queue, as a deploy that
// switches the mode does; Q2's claim-mode effect, which calls the
// recorded downstream. New's start-up calls (the queues' attributes, the
// table, the preflight) get faults like any other: a start-up that fails
// ends the process. When the process dies, the next incarnation starts after
// a while, with nothing of the old one's state.
func (w *world) startWorker(ctx context.Context, slot, inc int) {
	p := w.newProc(fmt.Sprintf("w%d.%d", slot, inc))
	skew := w.skew(p.id)
	now := func() time.Time { return time.Now().Add(skew) }
	fn := w.effectFn(p, now)
	eff, mode, group := w.q1Effect(p, fn)
	q1 := exactly.Config{Queues: []string{w.urls[q1Name]}, Effect: eff, Commit: exactly.CommitMode(mode), Outbox: w.limOutboxFor()}
	if group {
		// A wide window (virtual time costs nothing), so that the
		// effects' spread latencies still meet.
		q1.GroupCommit = w.shape.GroupWindow
	}
	w.noteMode(p, q1.Commit == exactly.CommitOptimistic)
	q2 := exactly.Config{Queues: []string{w.urls[q2Name]}, Effect: effect.Func(fn), Commit: exactly.CommitClaim}

	pctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var running []*exactly.Worker
	p.kill = func() {
		cancel()
		mu.Lock()
		ws := running
		mu.Unlock()
		now, done := context.WithCancel(context.Background())
		done() // abandon everything now; do not wait for the drain
		for _, wk := range ws {
			_ = wk.StopAndCancel(now)
		}
		if ctx.Err() != nil {
			return
		}
		w.wg.Go(func() {
			time.Sleep(5*time.Second + time.Duration(hash64(w.cfg.Seed, "restart", p.id)%uint64(20*time.Second)))
			if ctx.Err() == nil {
				w.startWorker(ctx, slot, inc+1)
			}
		})
	}
	p.stopNow = w.forcedStop(ctx, p, slot, inc, func() []*exactly.Worker {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(running)
	}) // forcedstop.go
	w.wg.Go(func() {
		for i, cfg := range []exactly.Config{q1, q2} {
			cfg.SQS, cfg.DynamoDB = &faultySQS{p: p, inner: w.sqs}, &faultyDynamo{p: p, inner: w.db}
			cfg.Table, cfg.Namespace, cfg.TTL, cfg.Logger = table, namespace, w.wide.ttl, w.log(p)
			sh := w.shape
			cfg.Concurrency, cfg.Receivers, cfg.RetryInPlace, cfg.AckDelay = sh.Concurrency, sh.Receivers, sh.RetryInPlace, sh.AckDelay
			cfg.ShutdownTimeout, cfg.PayloadHash, cfg.MaxInFlight = sh.ShutdownTimeout, w.payloadOf(p.id), sh.MaxInFlight
			cfg.WaitTime = w.waitTime() // sqslimits.go
			cfg.Hooks.Done = func(d exactly.Done) {
				if !p.dead.Load() { // as for its log lines (logCounter)
					w.poolDone(d)
				}
			}
			cfg.Test = w.testSeam(fmt.Sprintf("%s/%d", p.id, i), now)
			w.believe(&cfg.Test, p)
			wk, err := exactly.New(pctx, cfg)
			if err != nil {
				if p.dead.Load() || ctx.Err() != nil {
					// Dead already, or the run is ending: its start-up
					// was cut short, as its other pool shuts down (that
					// is no crash, and which of the two came first is
					// the runtime's order).
					return
				}
				// As for a Lambda cold start: a ConfigError with no fault
				// injected is the sim's or the product's bug.
				var ce *exactly.ConfigError
				if errors.As(err, &ce) && p.faults.Load() == 0 {
					w.violate("%s: exactly.New: configuration error on the simulated deployment, no fault injected: %v", p.id, err)
				}
				w.stat("pool: start-up failed", 1)
				w.crash(p, "start-up: exactly.New failed")
				return
			}
			mu.Lock()
			running = append(running, wk)
			mu.Unlock()
			w.wg.Go(func() { _ = wk.Run(pctx) })
		}
		w.gracefulStop(ctx, p, slot, inc, running)
	})
}

// gracefulStop: in a shape with graceful stops, about a third of the
// incarnations are stopped as ECS stops a task (Worker.Stop: receiving
// stops, running effects finish within ShutdownTimeout, what is held is
// handed back) at a time drawn from the seed, while they hold messages;
// the next incarnation starts after a while. A process that dies first is
// not stopped.
func (w *world) gracefulStop(ctx context.Context, p *proc, slot, inc int, ws []*exactly.Worker) {
	if !w.shape.Graceful || hash64(w.cfg.Seed, "graceful", p.id)%3 != 0 {
		return
	}
	t := time.NewTimer(30*time.Second + time.Duration(hash64(w.cfg.Seed, "graceful at", p.id)%uint64(5*time.Minute)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	if ctx.Err() != nil { // it ended as the timer fired (select picks at random)
		return
	}
	if p.dead.Load() {
		return
	}
	w.stat("pool: graceful stops", 1)
	for _, wk := range ws {
		_ = wk.Stop(context.Background())
	}
	w.exited(ctx, p, slot, inc)
}

// exited: p's task has exited after a stop (graceful or forced); its
// successor starts as a crashed one's does.
func (w *world) exited(ctx context.Context, p *proc, slot, inc int) {
	if p.dead.Swap(true) {
		return // it died while stopping (or stopped twice): its kill restarts it
	}
	w.wg.Go(func() {
		time.Sleep(5*time.Second + time.Duration(hash64(w.cfg.Seed, "restart", p.id)%uint64(20*time.Second)))
		if ctx.Err() == nil {
			w.startWorker(ctx, slot, inc+1)
		}
	})
}

// poolDone counts what came of each message a pool worker handled
// (Config.Hooks.Done).
func (w *world) poolDone(d exactly.Done) {
	w.stat("pool: "+string(d.Outcome), 1)
	if d.LeaseLost {
		w.stat("pool: lease lost", 1)
	}
	if d.CommitRetries > 0 {
		w.stat("pool: commit retried", 1)
	}
}
