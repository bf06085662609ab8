package outbox

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/outboxschema"
)

// HeldItem returns the message a held group is held at (ok false when the
// group is not held): what Release publishes again and Drop skips, with
// the id Drop asks for.
func HeldItem(ctx context.Context, db API, table, queue, group string) (Item, Held, bool, error) {
	h, ok, err := GroupHeld(ctx, db, table, queue, group)
	if err != nil || !ok {
		return Item{}, h, ok, err
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{outboxschema.AttrPK: str(partitionKey(queue, group)), outboxschema.AttrSK: num(h.Seq)},
	})
	if err != nil {
		return Item{}, h, true, fmt.Errorf("outbox: read the held message of group %q of %s: %w", group, queue, err)
	}
	return readItem(out.Item), h, true, nil
}
