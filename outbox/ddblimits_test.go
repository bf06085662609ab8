package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/ddblimit"
	"github.com/exactlyonce/exactly/outbox"
)

// txCounter counts TransactWriteItems requests.
type txCounter struct {
	dbAPI
	n atomic.Int64
}

func (c *txCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	return c.dbAPI.TransactWriteItems(ctx, in, o...)
}

// businessPut is a put on table of exactly size bytes as DynamoDB counts
// them.
func businessPut(table string, sk, size int) ddbtypes.TransactWriteItem {
	it := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "business"}, "sk": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(sk)},
		"v": &ddbtypes.AttributeValueMemberS{}}
	it["v"] = &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", size-ddblimit.ItemSize(it))}
	return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(table), Item: it}}
}

// TestWriteOverDynamoDBLimitsIsInvalid: Write refuses what DynamoDB would
// refuse, before any request, as ErrInvalid (no retry can fix it): a put
// over 400 KB, a transaction over 4 MB by what can be counted before the
// request (the puts' items and the other actions' keys). A transaction at
// exactly 4 MB by that count is sent, and DynamoDB, which counts more,
// refuses it: its ValidationException is ErrInvalid too. At 400 KB and
// under 4 MB the Write commits. Nothing of a refused Write is written.
func TestWriteOverDynamoDBLimitsIsInvalid(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		db := &txCounter{dbAPI: e.db}
		// A fixed clock: the items carry the time in milliseconds, a number
		// whose size DynamoDB counts by its significant digits, so a clock
		// that moves between the count below and the Write moves the sizes
		// by a byte (a millisecond ending in 0 is a byte smaller).
		now := time.UnixMilli(1_795_000_000_123)
		ob := outbox.New(db, e.table, outbox.WithClock(func() time.Time { return now }))
		// The Write's own items as the request counts them: the message's
		// put and its group's head (a key).
		m := func(g string) []outbox.Message { return []outbox.Message{msg(e.q1, g, g)} }
		own := func(g string) int {
			b, err := ob.Prepare(ctx, m(g))
			require.NoError(t, err)
			return ddblimit.TransactionBytes(b.Items)
		}
		// puts fills a transaction of total bytes (by the count) with puts
		// of at most 400,000 bytes, after the Write's own items.
		puts := func(sk int, total int) []ddbtypes.TransactWriteItem {
			var out []ddbtypes.TransactWriteItem
			for rest := total; rest > 0; sk++ {
				n := min(rest, 400_000)
				out = append(out, businessPut(e.table, sk, n))
				rest -= n
			}
			return out
		}
		for _, c := range []struct {
			group  string
			writes []ddbtypes.TransactWriteItem
			ok     bool
			sent   bool   // the request is made
			why    string // in the error
		}{
			{"item-at", []ddbtypes.TransactWriteItem{businessPut(e.table, 100, ddblimit.ItemBytes)}, true, true, ""},
			{"item-over", []ddbtypes.TransactWriteItem{businessPut(e.table, 200, ddblimit.ItemBytes+1)}, false, false, "400 KB"},
			{"tx-under", puts(300, ddblimit.TransactBytes-16*1024-own("tx-under")), true, true, ""},
			{"tx-at", puts(400, ddblimit.TransactBytes-own("tx-at")), false, true, "ValidationException"},
			{"tx-over", puts(500, ddblimit.TransactBytes+1-own("tx-over")), false, false, "4 MB"},
		} {
			before := db.n.Load()
			err := ob.Write(ctx, m(c.group), c.writes...)
			require.Equal(t, c.sent, db.n.Load() > before, "%s: request made", c.group)
			if c.ok {
				require.NoError(t, err, c.group)
				continue
			}
			require.ErrorIs(t, err, outbox.ErrInvalid, c.group)
			require.ErrorContains(t, err, c.why, c.group)
			got, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: map[string]ddbtypes.AttributeValue{
				"pk": c.writes[0].Put.Item["pk"], "sk": c.writes[0].Put.Item["sk"]}})
			require.NoError(t, err)
			require.Nil(t, got.Item, "%s: nothing written", c.group)
		}
		round, err := e.relay().Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, round.Published, "the messages of the Writes that committed")
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, map[string][]string{"item-at": {"item-at"}, "tx-under": {"tx-under"}}, bodies)
	})
}
