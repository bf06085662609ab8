package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Conflict attributes: what a completed record was asked for since, with
// another payload. Additive (docs/STABILITY.md): present only on records
// that met a conflict, never read by a claim or a commit.
const (
	AttrConflicts     = "conflicts"      // how many deliveries conflicted
	AttrConflictFirst = "conflict_first" // the first of them (a map)
	AttrConflictLast  = "conflict_last"  // the latest of them (a map)
	// In a conflict's map: payload_sha256, message_id (when known) and
	// at (epoch milliseconds).
	attrConflictAt = "at"
)

// ConflictNote is a delivery that conflicted with a completed record: its
// payload hash, its message and when.
type ConflictNote struct {
	PayloadSHA256 string
	MessageID     string
	At            time.Time
}

// NoteConflict records on the completed record c.Record (the one a claim
// or an optimistic commit found, Outcome Conflict) that a delivery of
// another payload met it: one UpdateItem that counts it (conflicts), keeps
// the first (conflict_first) and the latest (conflict_last). It is
// conditioned on the record's token and COMPLETED status and changes
// nothing else: not the status, the lease, the token or the expiry. A
// record replaced or expired since is left alone (nil: nothing to note).
// Its error is the caller's to log; the conflict stands either way.
func (s *Store) NoteConflict(ctx context.Context, c Claim, payloadSHA256, messageID string) error {
	if c.Outcome != Conflict || c.Record == nil || c.Record.Token == "" {
		return errors.New("dedup: a conflict note needs the completed record a claim met")
	}
	note := map[string]types.AttributeValue{
		AttrPayloadSHA256: str(payloadSHA256),
		attrConflictAt:    num(s.now().UnixMilli()),
	}
	if messageID != "" {
		note[AttrMessageID] = str(messageID)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 keyOf(c.Key),
		UpdateExpression:    aws.String("SET #cf = if_not_exists(#cf, :note), #cl = :note ADD #cn :one"),
		ConditionExpression: aws.String("#tok = :tok AND #st = :completed"),
		ExpressionAttributeNames: map[string]string{
			"#cf": AttrConflictFirst, "#cl": AttrConflictLast, "#cn": AttrConflicts,
			"#tok": AttrToken, "#st": AttrStatus,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":note":      &types.AttributeValueMemberM{Value: note},
			":one":       num(1),
			":tok":       str(c.Record.Token),
			":completed": str(StatusCompleted),
		},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("dedup: cannot note the conflict on %q: %w", c.Key, err)
	}
	return nil
}

// decodeConflicts reads a record's conflict attributes into r.
func decodeConflicts(item map[string]types.AttributeValue, r *Record) {
	r.Conflicts = int(GetN(item, AttrConflicts))
	r.FirstConflict = decodeNote(item[AttrConflictFirst])
	r.LastConflict = decodeNote(item[AttrConflictLast])
}

func decodeNote(v types.AttributeValue) *ConflictNote {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return nil
	}
	return &ConflictNote{
		PayloadSHA256: GetS(m.Value, AttrPayloadSHA256),
		MessageID:     GetS(m.Value, AttrMessageID),
		At:            time.UnixMilli(GetN(m.Value, attrConflictAt)),
	}
}
