package outbox

import (
	"context"
	"fmt"
)

// HeldItem returns the message a held group is held at (ok false when the
// group is not held): what Release publishes again and Drop skips, with
// the id Drop asks for.
func HeldItem(ctx context.Context, db API, table, queue, group string) (Item, Held, bool, error) {
	h, ok, err := GroupHeld(ctx, db, table, queue, group)
	if err != nil || !ok {
		return Item{}, h, ok, err
	}
	it, err := getItem(ctx, db, table, partitionKey(queue, group), h.Seq)
	if err != nil {
		return Item{}, h, true, fmt.Errorf("outbox: read the held message of group %q of %s: %w", group, queue, err)
	}
	return it, h, true, nil
}
