package builtin_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/internal/builtin"
)

// deposit is ledger message i: its own dedup key, one of 4 accounts.
func deposit(i int, opts ...func(*effect.Message)) effect.Message {
	body := fmt.Sprintf(`{"account":"a%d","amount_cents":%d,"seq":%d}`, i%4, 100+i, i+1)
	return exactlytest.Msg(body, append([]func(*effect.Message){exactlytest.DedupID("d" + strconv.Itoa(i)), exactlytest.Group("a" + strconv.Itoa(i%4))}, opts...)...)
}

// balance reads account a's balance_cents from the ledger table.
func balance(t *testing.T, db *exactlytest.DynamoDB, a string) string {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: strPtr("ledger"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acct#" + a}},
	})
	require.NoError(t, err)
	return out.Item["balance_cents"].(*types.AttributeValueMemberN).Value
}

func strPtr(s string) *string { return &s }

// TestLedgerCarriedFindsDuplicates: in carried mode the ledger's entry
// carries the record: a redelivery is a duplicate and a key reused for
// another body a conflict, neither applied; a failing effect is judged
// without a claim; and the dedup table is never written.
func TestLedgerCarriedFindsDuplicates(t *testing.T) {
	t.Parallel()
	db := exactlytest.NewDynamoDB(t)
	exactlytest.CreateTable(t, db, "ledger")
	h := exactlytest.New(t, &builtin.Ledger{Table: "ledger"}, exactlytest.WithDynamoDB(db), exactlytest.Commit(exactly.CommitCarried))
	for i := range 8 {
		h.RequireApplied(deposit(i))
	}
	before := balance(t, db, "a1")
	for i := range 8 {
		h.RequireDuplicate(deposit(i))
	}
	// Key d1 again, for another amount: a conflict.
	h.RequireConflict(exactlytest.Msg(`{"account":"a1","amount_cents":9999,"seq":99}`, exactlytest.DedupID("d1"), exactlytest.Group("a1")))
	require.Equal(t, before, balance(t, db, "a1"), "nothing applied twice")
	require.Equal(t, "206", before, "101 + 105")

	// A body the ledger refuses: judged at once, no claim made.
	h.RequireFailed(exactlytest.Msg(`not json`, exactlytest.DedupID("bad")))

	scan, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: strPtr(exactlytest.Table)})
	require.NoError(t, err)
	require.Empty(t, scan.Items, "no record item in the dedup table")
}

// TestLedgerWriteUnitsPerMessage counts what a ledger message costs in
// write units (DynamoDB's billing, in memdynamo): optimistic mode adds the
// record, a third transaction item (6 units); carried mode puts the record
// on the entry, as many units as a hand-written at-least-once consumer
// applying the same two writes in one transaction (4): within 1.05×.
func TestLedgerWriteUnitsPerMessage(t *testing.T) {
	t.Parallel()
	const n = 50
	perMessage := func(mode exactly.CommitMode) float64 {
		db := exactlytest.NewDynamoDB(t)
		exactlytest.CreateTable(t, db, "ledger")
		ledger := &builtin.Ledger{Table: "ledger"}
		if mode == "" { // hand-written: the ledger's writes alone, one transaction per message
			for i := range n {
				m := deposit(i)
				out, err := ledger.Apply(context.Background(), effect.Input{Message: m, Key: m.DedupID})
				require.NoError(t, err)
				_, err = db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: out.Writes})
				require.NoError(t, err)
			}
			return float64(db.WriteUnits()) / n
		}
		h := exactlytest.New(t, ledger, exactlytest.WithDynamoDB(db), exactlytest.Commit(mode))
		for i := range n {
			h.RequireApplied(deposit(i))
		}
		return float64(db.WriteUnits()) / n
	}
	hand, optimistic, carried := perMessage(""), perMessage(exactly.CommitOptimistic), perMessage(exactly.CommitCarried)
	t.Logf("write units per ledger message: hand-written %.2f, optimistic %.2f (%.2f×), carried %.2f (%.2f×)",
		hand, optimistic, optimistic/hand, carried, carried/hand)
	require.Equal(t, 4.0, hand)
	require.Equal(t, 6.0, optimistic)
	require.LessOrEqual(t, carried, 1.05*hand)
}
