package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/cli"
)

// EffectName is the effect the chaos worker registers (cmd/chaos/worker).
const EffectName = "chaos-ledger"

// SleepyLedger is the ledger effect, slowed down on request: a body with
// "sleep_ms" sleeps that long before the ledger's writes are made, so that a
// handler can outlive the visibility timeout and the lease unless heartbeats
// keep them. It exists only in the chaos harness's own worker build; the
// ledger ignores the extra field.
type SleepyLedger struct {
	Ledger effect.Effect
}

// WritesOnly: the ledger's whole effect is its writes (the sleep changes
// nothing), so the worker's default commit mode is the ledger's.
func (*SleepyLedger) WritesOnly() {}

// NewSleepyLedger is the factory of EffectName. It takes the command line's
// own Env, which carries the built-in ledger's flags (--ledger-table).
func NewSleepyLedger(env cli.Env) (effect.Effect, error) {
	if env.LedgerTable == "" {
		return nil, fmt.Errorf("--ledger-table (WORKER_LEDGER_TABLE) is required by the %s effect", EffectName)
	}
	return &SleepyLedger{Ledger: &builtin.Ledger{Table: env.LedgerTable, Confirm: env.LedgerConfirm}}, nil
}

// Apply sleeps as the body asks (returning early, retryable, if ctx ends),
// then applies the ledger effect.
func (s *SleepyLedger) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	var b struct {
		SleepMS int64 `json:"sleep_ms"`
	}
	// A body that is not JSON is the ledger's to reject.
	if json.Unmarshal([]byte(in.Message.Body), &b) == nil && b.SleepMS > 0 {
		t := time.NewTimer(time.Duration(b.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return effect.Output{}, fmt.Errorf("chaos: sleep of %d ms cut short: %w", b.SleepMS, context.Cause(ctx))
		}
	}
	return s.Ledger.Apply(ctx, in)
}
