package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

// Writes that depend on what the effect read (issue 19): Q1's ledger effect
// also reads the account's "rmw#" item (through the process's faulty
// client: a GetItem) and writes it back as read + amount, unconditionally.
// Only the dedup record's fencing keeps a stale read from being committed:
// a zombie that read before a takeover and commits after it would set the
// balance back (a lost update), which the end check sees. In half of the
// worlds (and every short-TTL world) the ledger also writes no entry item
// (its attribute_not_exists condition would refuse a second application
// on its own, hiding a fencing hole): the dedup record alone stands between
// a message and a second application.

func rmwKey(acct string) string { return "rmw#" + acct }

// ledgerApply is Q1's effect: the product's built-in ledger effect, plus the
// read-dependent write, without the entry item in unguarded worlds.
func (w *world) ledgerApply(ctx context.Context, p *proc, ledger *builtin.Ledger, in effect.Input, s *msgSpec) (effect.Output, error) {
	out, err := ledger.Apply(ctx, in)
	if err != nil {
		return out, err
	}
	if !w.wide.guarded && len(out.Writes) > 1 {
		out.Writes = out.Writes[:1] // the account's ADD only
	}
	acct := s.queue[:2] + "-" + s.group
	got, err := read(ctx, p, "GetItem", rmwKey(acct), func() (*dynamodb.GetItemOutput, error) {
		return w.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: rmwKey(acct)}}, ConsistentRead: aws.Bool(true)})
	})
	if err != nil {
		w.retryable(p, s.lid, "read of the balance failed")
		return effect.Output{}, fmt.Errorf("sim: read balance: %w", err)
	}
	var bal, n int64
	if got.Item != nil {
		bal, n = num(got.Item["balance_cents"]), num(got.Item["applied"])
	}
	out.Writes = append(out.Writes, ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
		TableName:                 aws.String(table),
		Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: rmwKey(acct)}},
		UpdateExpression:          aws.String("SET balance_cents = :b, applied = :n"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":b": numAV(bal + int64(s.lid)), ":n": numAV(n + 1)},
	}})
	return out, nil
}

func numAV(n int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Stale commits. A commit writes the balance it read plus its amount; the
// item must then still hold what was read (the transaction is serialised
// with the sim's read of the item before it, under w.txMu), or the commit
// lost the updates made in between. That is legitimate in one case only: a
// re-application past its record's TTL (a duplicate outside the dedup
// window, or a worker that read before the record expired and commits
// after it, over the expired record): exactly-once does not cover it, and
// its read may predate commits that it then overwrites. Such a commit is
// excused, and exactly the updates it lost are taken off what the account
// is owed (w.wide.rmwLost); any other stale commit is a violation, judged
// when it is made (issue 19; before, every account with a re-application
// went unjudged).

// rmwBefore reads the read-dependent items a transaction writes, as they
// are before it. w.txMu held.
func (w *world) rmwBefore(in *dynamodb.TransactWriteItemsInput) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, it := range in.TransactItems {
		if it.Update == nil || !strings.HasPrefix(pkOf(it.Update.Key), "rmw#") {
			continue
		}
		k := pkOf(it.Update.Key)
		got, err := w.balance(context.Background(), k)
		if err == nil {
			out[k] = got
		}
	}
	return out
}

// judgeRMW judges the read-dependent writes of p's transaction, which took
// effect, committing the records of keys. stalled: the request itself
// stalled before it reached the table (freeze, pause), after the worker's
// last check that it held the message: the window DESIGN.md leaves (Group
// order), where a late commit is excused like a re-application past its
// TTL. w.txMu held.
func (w *world) judgeRMW(p *proc, in *dynamodb.TransactWriteItemsInput, keys []string, before map[string][2]int64, stalled bool) {
	for _, it := range in.TransactItems {
		if it.Update == nil || !strings.HasPrefix(pkOf(it.Update.Key), "rmw#") {
			continue
		}
		k := pkOf(it.Update.Key)
		acct := strings.TrimPrefix(k, "rmw#")
		var s *msgSpec
		for _, key := range keys {
			if m := w.byKey[key]; m != nil && m.queue[:2]+"-"+m.group == acct {
				s = m
			}
		}
		if s == nil {
			continue
		}
		v := it.Update.ExpressionAttributeValues
		read := [2]int64{num(v[":b"]) - int64(s.lid), num(v[":n"]) - 1}
		held := before[k]
		if read == held {
			continue
		}
		w.mu.Lock()
		again := w.applied[s.lid] > 1 && w.granted(s.lid)
		switch {
		case again:
			w.tr(s.lid, "%s committed it again past its TTL on a stale read of %s (read %d from %d applications; it held %d from %d): excused", p.id, k, read[0], read[1], held[0], held[1])
			w.stats["window: read-dependent: a re-application past its record's TTL committed a stale read, its loss taken off exactly (DESIGN.md, What it guarantees: while its record lives)"]++
		case stalled:
			again = true
			w.tr(s.lid, "%s committed it on a stale read of %s, its commit request stalled past the visibility (read %d from %d applications; it held %d from %d): the documented window, excused", p.id, k, read[0], read[1], held[0], held[1])
			w.stats["window: read-dependent: a commit request stalled after the held check committed a stale read, its loss taken off exactly (DESIGN.md, Group order: what remains)"]++
		}
		w.mu.Unlock()
		if !again {
			w.violate("read-dependent balance: %s committed message %d (%s) on a stale read of %s: it read balance %d from %d applications, but the item held %d from %d (a lost update); its story: %s",
				p.id, s.lid, s.key, k, read[0], read[1], held[0], held[1], w.storyOf(s.lid))
			continue
		}
		x := w.wide
		x.mu.Lock()
		lost := x.rmwLost[acct]
		x.rmwLost[acct] = [2]int64{lost[0] + held[0] - read[0], lost[1] + held[1] - read[1]}
		x.mu.Unlock()
	}
}

// checkRMW: each account's read-dependent balance is the sum of the
// applications the commit log saw (want), as its ADD balance is, less
// exactly the updates lost to excused stale commits (judgeRMW). w.mu held.
func (w *world) checkRMW(ctx context.Context, want map[string][2]int64, bad func(string, ...any)) {
	x := w.wide
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, acct := range slices.Sorted(maps.Keys(want)) { // a replay reports in the same order
		v := want[acct]
		a := acct[len("acct#"):]
		if lost, ok := x.rmwLost[a]; ok {
			v = [2]int64{v[0] - lost[0], v[1] - lost[1]}
			w.stats["end: read-dependent balance judged less the updates excused stale commits lost"]++
		}
		got, err := w.balance(ctx, rmwKey(a))
		if err != nil {
			bad("read %s: %v", acct, err)
			continue
		}
		if got != v {
			bad("read-dependent balance: %s has balance %d from %d applications, want %d from %d: a commit of a stale read (a lost update)", rmwKey(a), got[0], got[1], v[0], v[1])
		}
	}
}
