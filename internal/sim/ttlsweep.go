package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// DynamoDB's TTL sweeper. DynamoDB deletes an expired item at some time
// after its expires_at, at no time it promises; memdynamo deletes one only
// when told (memdynamo.DB.SweepExpired). Every world runs a sweeper over
// the dedup table: every 1 to 5 s (drawn from the seed) it deletes each
// record past its expires_at whose own delay has passed, a delay drawn
// from the seed and the record (0 to 2 minutes). With the short TTLs of a
// quarter of the worlds (ttl.go) records then disappear under workers,
// conflict notes and operators, as they do in DynamoDB, where before they
// only stayed past their expiry.
//
// What the judge makes of it: a COMPLETED record swept lets its message
// apply once more (a duplicate after the TTL is a new message: DESIGN.md),
// as a claim that meets it expired does; and every record in the table was
// written by a claim or a commit: one without a status (a write that
// created the record it meant to change, such as a conflict note whose
// condition is missing) is a violation.

// sweepEvery is how often seed's sweeper runs.
func sweepEvery(seed uint64) time.Duration {
	return time.Second + time.Duration(hash64(seed, "sweep every")%4000)*time.Millisecond
}

// sweepDelay is how long after its expiry the record pk, expiring at exp,
// is swept.
func sweepDelay(seed uint64, pk string, exp time.Time) time.Duration {
	return time.Duration(hash64(seed, "sweep", pk, strconv.FormatInt(exp.Unix(), 10))%120_000) * time.Millisecond
}

// sweeper sweeps the dedup table until ctx ends.
func (w *world) sweeper(ctx context.Context) {
	every := sweepEvery(w.cfg.Seed)
	t := time.NewTicker(every)
	defer t.Stop()
	bad := map[string]bool{} // records reported without a status
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Among the calls that reach the fakes at this instant, in the
		// sequencer's order (sequencer.go), so that a seed replays.
		w.seq.step("ttl-sweeper", "SweepExpired", table)
		now := time.Now()
		for _, s := range w.db.SweepExpired(now, func(_ string, key map[string]ddbtypes.AttributeValue, exp time.Time) bool {
			return !now.Before(exp.Add(sweepDelay(w.cfg.Seed, pkOf(key), exp)))
		}) {
			w.swept(pkOf(s.Item), s.Item)
		}
		w.statusless(ctx, bad)
	}
}

// swept notes the sweep of key's record.
func (w *world) swept(key string, rec map[string]ddbtypes.AttributeValue) {
	st := dedup.GetS(rec, dedup.AttrStatus)
	w.stat("ttl: record swept ("+st+")", 1)
	s := w.byKey[key]
	if s == nil || st != dedup.StatusCompleted {
		return
	}
	x := w.wide
	x.mu.Lock()
	x.grants[s.lid]++
	x.mu.Unlock()
	w.mu.Lock()
	w.tr(s.lid, "its COMPLETED record was swept by DynamoDB's TTL")
	w.mu.Unlock()
}

// statusless reports the dedup records (their keys in the world's
// namespace: the ledger's items share the table) that have no status, once
// each.
func (w *world) statusless(ctx context.Context, bad map[string]bool) {
	in := &dynamodb.ScanInput{TableName: aws.String(table), FilterExpression: aws.String("attribute_not_exists(#st) AND begins_with(#pk, :ns)"),
		ExpressionAttributeNames:  map[string]string{"#st": dedup.AttrStatus, "#pk": dedup.AttrPK},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":ns": &ddbtypes.AttributeValueMemberS{Value: namespace + "#"}}}
	for {
		out, err := w.db.Scan(ctx, in)
		if err != nil {
			return // the run is ending
		}
		for _, it := range out.Items {
			key := pkOf(it)
			if bad[key] {
				continue
			}
			bad[key] = true
			lid := -1
			if s := w.byKey[key]; s != nil {
				lid = s.lid
			}
			w.violate("ttl: a record without a status: %s (logical %d) has %s: a write created the record it was to change (after DynamoDB's TTL swept it)",
				key, lid, attrNames(it))
		}
		if out.LastEvaluatedKey == nil {
			return
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// attrNames lists an item's attribute names.
func attrNames(it map[string]ddbtypes.AttributeValue) string {
	var names []string
	for k := range it {
		names = append(names, k)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// judgeNote: a conflict note (dedup.Store.NoteConflict: an UpdateItem that
// sets conflict_first) takes effect only on a COMPLETED record: it notes
// what a claim met, and a record swept or claimed again since is left
// alone.
func (w *world) judgeNote(p *proc, in *dynamodb.UpdateItemInput, pre map[string]ddbtypes.AttributeValue, err error) {
	if err != nil || !slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), dedup.AttrConflictFirst) {
		return
	}
	w.stat("path: conflict noted", 1)
	if st := dedup.GetS(pre, dedup.AttrStatus); pre == nil || st != dedup.StatusCompleted {
		if pre == nil {
			st = "absent (swept, or never written)"
		}
		key := pkOf(in.Key)
		lid := -1
		if s := w.byKey[key]; s != nil {
			lid = s.lid
		}
		w.violate("ttl: a conflict note took effect on a record that was not COMPLETED: %s's note on %s (logical %d) found it %s",
			p.id, key, lid, st)
	}
}
