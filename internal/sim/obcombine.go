package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// Combined Writes in the swarm's outbox half (issue 32; the chain's
// combiner is chain_combine.go). In the outbox seeds that draw Combine,
// most of a group's writes follow the one before by a few microseconds,
// the producer makes every planned write in a goroutine of its own, on one
// outbox.Outbox, and its transactions are held obCmbHold: Writes of one
// group made meanwhile queue on the group's line and go together. Their
// order is then the order in which they committed, not the plan's: the
// judge learns it from the outbox table (obCommitOrder), the sequence
// numbers the product gave the messages, before it judges a first copy
// (published1) and before the end's order check. Every invariant of the
// outbox half holds as it does for one Write at a time: nothing published
// that was not written and committed, a group's messages reach SQS and are
// first applied in the order they committed, each once.
const obCmbHold = 5 * time.Millisecond

// drawCombine: one outbox seed in three (not the read-pages ones, whose
// writes are one per group).
func (o obShape) drawCombine(pick func(name string, n int) int) obShape {
	o.Combine = o.On && !o.Pages && pick("ob combine", 3) == 0
	return o
}

// obGap is the time from one planned message of a group to the next: in
// a combining seed, two in three follow by 1 to 50 µs.
func (o obShape) obGap(r func(parts ...string) uint64, lid int) time.Duration {
	if o.Combine && r("combine gap", strconv.Itoa(lid))%3 != 0 {
		return time.Duration(1+r("combine µs", strconv.Itoa(lid))%50) * time.Microsecond
	}
	return o.gap(r, lid)
}

// producerDB is the producer's DynamoDB client: in a combining seed its
// transactions are held, and the ones that carry several Writes counted.
func (o *obHalf) producerDB(p *proc) outbox.API {
	d := &cDynamo{p: p, inner: o.w.db}
	if !o.s.Combine {
		return d
	}
	return &holdDB{cDynamo: d, hold: obCmbHold, writePrefix: "biz#", several: "outbox: transactions of several Writes"}
}

// produceAll makes the planned writes at their times; in a combining seed
// each in a goroutine of its own. False when the process died first.
func (o *obHalf) produceAll(ctx context.Context, p *proc, write func(*obWrite) bool) bool {
	w := o.w
	var wg sync.WaitGroup
	ok := true
	var mu sync.Mutex
	for _, wr := range o.writes {
		if d := wr.at - time.Since(w.start); d > 0 {
			time.Sleep(d)
		}
		if !o.s.Combine {
			if !write(wr) {
				return false
			}
			continue
		}
		if ctx.Err() != nil || p.dead.Load() {
			break
		}
		wg.Go(func() {
			if !write(wr) {
				mu.Lock()
				ok = false
				mu.Unlock()
			}
		})
		// A microsecond apart, also when behind its plan: each Write
		// reaches the group's line before the next starts (goroutines
		// started at one instant would race for it: no replay).
		time.Sleep(time.Microsecond)
	}
	wg.Wait()
	return ok && ctx.Err() == nil && !p.dead.Load()
}

// obCommitOrder reads group's messages from the outbox table, in the order
// the product numbered them (committed), and makes that their order: each
// committed message's gseq is its place among them, the ones not
// committed yet follow in the plan's order. In a combining seed only.
// o.mu held: it returns its violations, for the caller to report once it
// has let o.mu go (w.mu is taken before o.mu).
func (o *obHalf) obCommitOrder(ctx context.Context, group string) (bad []string) {
	if !o.s.Combine || len(o.byGroup[group]) == 0 {
		return nil
	}
	s0 := o.byGroup[group][0]
	pk := o.w.urls[s0.queue] + "#" + group
	if o.committed == nil {
		o.committed = map[int]int64{}
	}
	var start map[string]ddbtypes.AttributeValue
	for {
		out, err := o.w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(obTable), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :zero"),
			ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: pk}, ":zero": &ddbtypes.AttributeValueMemberN{Value: "0"}},
			ExclusiveStartKey:         start})
		if err != nil {
			return []string{fmt.Sprintf("outbox: read group %s's order: %v", group, err)}
		}
		for _, it := range out.Items {
			key, _ := it[outboxschema.AttrKey].(*ddbtypes.AttributeValueMemberS)
			sk, _ := it[outboxschema.AttrSK].(*ddbtypes.AttributeValueMemberN)
			if key == nil || sk == nil || o.byKey[key.Value] == nil {
				continue
			}
			n, _ := strconv.ParseInt(sk.Value, 10, 64)
			o.committed[o.byKey[key.Value].lid] = n
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	bad = o.obConsecutive(group)
	msgs := o.byGroup[group]
	plan := map[int]int{}
	for i, s := range msgs {
		plan[s.lid] = i
	}
	slices.SortStableFunc(msgs, func(a, b *msgSpec) int {
		na, aok := o.committed[a.lid]
		nb, bok := o.committed[b.lid]
		switch {
		case aok && bok:
			return int(na - nb)
		case aok != bok:
			if aok {
				return -1
			}
			return 1
		}
		return plan[a.lid] - plan[b.lid]
	})
	for i, s := range msgs {
		s.gseq = i
	}
	return bad
}

// obConsecutive judges the sequence numbers a group's committed Writes
// got: each Write's messages of the group consecutive and in the order it
// gave them (a group's lids are in its plan's order). The order the judge
// takes from the product must not be one the product made up. o.mu held;
// it returns its violations.
func (o *obHalf) obConsecutive(group string) (bad []string) {
	byWrite := map[string][]int{}
	for _, s := range o.byGroup[group] {
		if _, ok := o.committed[s.lid]; ok {
			byWrite[o.writeOf[s.lid]] = append(byWrite[o.writeOf[s.lid]], s.lid)
		}
	}
	for _, wr := range slices.Sorted(maps.Keys(byWrite)) {
		lids := byWrite[wr]
		slices.Sort(lids)
		for i := 1; i < len(lids); i++ {
			if o.committed[lids[i]] != o.committed[lids[i-1]]+1 && !o.badWrite[wr] {
				if o.badWrite == nil {
					o.badWrite = map[string]bool{}
				}
				o.badWrite[wr] = true
				var sks []int64
				for _, l := range lids {
					sks = append(sks, o.committed[l])
				}
				bad = append(bad, fmt.Sprintf("outbox: the Write of %s (messages %v of group %s) committed at sequence numbers %v: not consecutive and in its order", wr, lids, group, sks))
			}
		}
	}
	return bad
}

// obCommitOrderAll learns every group's commit order, before the end's
// order check.
func (w *world) obCommitOrderAll(ctx context.Context) {
	o := w.ob
	if !o.s.Combine {
		return
	}
	var bad []string
	defer func() {
		for _, b := range bad {
			w.violate("%s", b)
		}
	}()
	o.mu.Lock()
	defer o.mu.Unlock()
	groups := slices.Sorted(maps.Keys(o.byGroup))
	for _, g := range groups {
		bad = append(bad, o.obCommitOrder(ctx, g)...)
	}
}

// holdDB holds a process's transactions for hold, so that the Writes its
// goroutines make meanwhile queue behind them and are combined, and counts
// (under several) the ones that put more than one item whose key starts
// with writePrefix: one business item per Write.
type holdDB struct {
	*cDynamo
	hold        time.Duration
	writePrefix string
	several     string
}

func (d *holdDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	n := 0
	for _, it := range in.TransactItems {
		if it.Put != nil && strings.HasPrefix(keyStr(it.Put.Item), d.writePrefix) {
			n++
		}
	}
	if n > 1 {
		d.p.stat(d.several, 1)
	}
	time.Sleep(d.hold)
	return d.cDynamo.TransactWriteItems(ctx, in, opt...)
}
