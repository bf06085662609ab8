package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// chainLog is a chain process's logger (the relays'): each line is
// counted in the run's stats ("relay log: LEVEL message"), and kept in
// Result.Logs with Config.Logs, instead of going to slog.Default, whose
// thousands of WARN lines (sweeps and groups left after injected faults)
// buried CI's log. Nothing the judge checks reads them: the relay tells
// it what matters through OnRound.
type chainLog struct {
	p     *cproc
	attrs []slog.Attr
}

func (c *chain) log(p *cproc) *slog.Logger { return slog.New(chainLog{p: p}) }

func (h chainLog) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || (h.p.c.cfg.Logs && l >= slog.LevelDebug)
}

func (h chainLog) Handle(_ context.Context, r slog.Record) error {
	c := h.p.c
	// A dead process says nothing more; what its goroutines log on their
	// way out comes in the runtime's order, and is not counted.
	alive := !h.p.dead.Load()
	if alive && r.Level >= slog.LevelInfo {
		c.stat("relay log: "+r.Level.String()+" "+r.Message, 1)
	}
	if !c.cfg.Logs {
		return nil
	}
	var b strings.Builder
	dead := ""
	if !alive {
		dead = " (dead)"
	}
	fmt.Fprintf(&b, "%s %s%s %s: %s", time.Now().Format("15:04:05.000"), h.p.id, dead, r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	c.mu.Lock()
	c.logs = append(c.logs, b.String())
	c.mu.Unlock()
	return nil
}

func (h chainLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h chainLog) WithGroup(string) slog.Handler { return h }
