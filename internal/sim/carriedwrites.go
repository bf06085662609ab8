package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
)

// Refused writes in carried worlds. A carried commit's transaction puts the
// carrier first; its cancellation reasons then tell the record's verdict
// (the carrier's: a duplicate or a conflict) from an effect write's own
// failed condition (any later one's: permanent, nothing applied). Without
// a write after the carrier that can fail, a verdict read from the wrong
// reason passes every run. So in a carried world about one Q1 message in
// ten ("refused") has an effect write after the carrier whose condition
// fails at every delivery: a Put of guard#<lid>, an item the world writes
// at its start, on attribute_not_exists(pk). Its commit must be judged
// permanent at once: the message ends in DLQ1 (its redrive copies too),
// never applied, never taken for a duplicate and deleted.

// refusedWorkload marks the refused messages and writes their guards.
func (w *world) refusedWorkload(ctx context.Context) error {
	if !w.shape.Carried {
		return nil
	}
	for _, s := range w.msgs {
		next := w.byLid[s.lid+1]
		if s.queue != q1Name || s.deadEnd() || s.fixable || s.lim != nil || strings.HasPrefix(s.dedupID, "shared-") ||
			(next != nil && next.conflict) || w.obIsOutbox(s) || hash64(w.cfg.Seed, "refused", strconv.Itoa(s.lid))%10 != 0 {
			continue
		}
		s.refused = true
		if _, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: guardKey(s.lid)},
		}}); err != nil {
			return err
		}
		w.stat("workload: carried commit with an effect write that fails its condition (refused)", 1)
	}
	return nil
}

func guardKey(lid int) string { return "guard#" + strconv.Itoa(lid) }

// refusedWrite adds a refused message's failing write after the carrier
// (at the end of the effect's writes).
func (w *world) refusedWrite(p *proc, s *msgSpec, out effect.Output, err error) effect.Output {
	if err != nil || !s.refused || len(out.Writes) < 2 {
		return out
	}
	w.permanent(p, s.lid, "commit: an effect write after the carrier fails its condition")
	out.Writes = append(out.Writes, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
		TableName:                aws.String(table),
		Item:                     map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: guardKey(s.lid)}, "by": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprint(s.lid)}},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": "pk"},
	}})
	return out
}

// failsAtCommit: every commit of the message is refused (ValidationException
// or a failed effect-write condition): it must be failed at once, its
// commit not retried nor the message received again (holes.go).
func (s *msgSpec) failsAtCommit() bool { return s.invalid || s.refused }

// observeRefused: p's commit of key alone was cancelled; when it is a
// refused message's and its guard's condition failed, it is judged as an
// invalid commit is (holes.go: never retried, never redelivered).
func (w *world) observeRefused(p *proc, key string, err error) {
	s := w.byKey[key]
	var tce *ddbtypes.TransactionCanceledException
	if s == nil || !s.refused || !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 {
		return
	}
	if aws.ToString(tce.CancellationReasons[len(tce.CancellationReasons)-1].Code) != "ConditionalCheckFailed" {
		return
	}
	w.stat("dynamo: refused write's condition failed (carried)", 1)
	w.observeInvalid(p, s.key)
}
