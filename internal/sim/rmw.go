package sim

import (
	"context"
	"fmt"
	"strconv"

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

// checkRMW: each account's read-dependent balance is the sum of the
// applications the commit log saw (want), as its ADD balance is. w.mu held.
//
// An account one of whose messages was applied again after its record's
// TTL (reapplied: a duplicate outside the dedup window, which exactly-once
// does not cover) may have lost an update: a worker that read the balance
// before the record expired commits after it. Counted, not judged.
func (w *world) checkRMW(ctx context.Context, want map[string][2]int64, reapplied map[string]bool, bad func(string, ...any)) {
	for acct, v := range want {
		if reapplied[acct] {
			w.stats["end: read-dependent balance not judged (a message applied again past its TTL)"]++
			continue
		}
		got, err := w.balance(ctx, rmwKey(acct[len("acct#"):]))
		if err != nil {
			bad("read %s: %v", acct, err)
			continue
		}
		if got != v {
			bad("read-dependent balance: %s has balance %d from %d applications, want %d from %d: a commit of a stale read (a lost update)", rmwKey(acct[len("acct#"):]), got[0], got[1], v[0], v[1])
		}
	}
}
