package process

import (
	"context"
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// noteTimeout bounds the conflict note: the delivery waits for it.
const noteTimeout = 2 * time.Second

// noteConflict records on the completed record a claim met that a delivery
// of another payload (c) conflicted with it (dedup.Store.NoteConflict: one
// conditional UpdateItem), so that operators see both payload hashes. It
// does nothing for another outcome. A note that fails is logged and the
// conflict stands: the delivery's fate does not depend on it.
func (p *Processor) noteConflict(ctx context.Context, claim dedup.Claim, c Call) {
	if claim.Outcome != dedup.Conflict || claim.Record == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	if err := p.Store.NoteConflict(ctx, claim, c.PayloadSHA256, c.MessageID); err != nil {
		p.Log.Warn("conflict not noted on its record", "key", c.Key, "err", err)
	}
}
