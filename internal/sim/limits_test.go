package sim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// TestLimitWorkloadSitsAtTheLimits: each limit class's commit, as the
// product will count it (the record as an update: its key; plus the
// effect's own writes and, with Send, the outbox's head and message), is
// exactly at, one under or one over its limit (4 MB - 16 KiB under).
func TestLimitWorkloadSitsAtTheLimits(t *testing.T) {
	w := &world{lims: &limits{optimistic: map[string]bool{}, reqs: map[int]int{}}, urls: map[string]string{q2Name: "https://sqs.sim/q2"},
		wide: newWidened(1), stats: map[string]int{}}
	p := w.newProc("w0.0")
	key := "sim#q1-orders#k7"
	base := ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "acct#q1-g0"}}, UpdateExpression: aws.String("ADD b :a")}}
	record := ddblimit.ItemSize(map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: key}})
	for k := limWrites98; k < numLimKinds; k++ {
		for _, send := range []bool{false, true} {
			if send && k > limWrites100 {
				continue
			}
			s := &msgSpec{lid: 7, queue: q1Name, key: key, lim: &limSpec{kind: k, send: send}}
			out := w.limApply(p, effect.Input{Key: key}, s, effect.Output{Writes: []ddbtypes.TransactWriteItem{base}})
			actions := 1 + len(out.Writes) + 2*len(out.Send)
			bytes := record + ddblimit.TransactionBytes(out.Writes)
			biggest := 0
			for _, it := range out.Writes {
				if it.Put != nil {
					biggest = max(biggest, ddblimit.ItemSize(it.Put.Item))
				}
			}
			var got, want, limit int
			switch {
			case k <= limWrites100:
				got, want, limit = actions, ddblimit.TransactItems-1+int(k-limWrites98), ddblimit.TransactItems
			case k <= limItemOver:
				got, want, limit = biggest, ddblimit.ItemBytes-1+int(k-limItemUnder), ddblimit.ItemBytes
			default:
				limit = ddblimit.TransactBytes
				got, want = bytes, map[limKind]int{limTxUnder: limit - 16*1024, limTxAt: limit, limTxOver: limit + 1}[k]
				if biggest > ddblimit.ItemBytes || actions > ddblimit.TransactItems {
					t.Errorf("%s: an item of %d bytes, %d actions: only the total may pass its limit", k, biggest, actions)
				}
			}
			if got != want {
				t.Errorf("%s (send %v): %d, want %d", k, send, got, want)
			}
			if k.over() != (got > limit) {
				t.Errorf("%s: over() is %v, at %d of %d", k, k.over(), got, limit)
			}
		}
	}
	if n := w.stats["dlq: permanent verdict (effect: commit past a DynamoDB limit)"]; n != 4 {
		t.Errorf("%d permanent verdicts, want 4 (the three over, 100 writes with and without Send)", n)
	}
}
