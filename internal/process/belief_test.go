package process_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/process"
)

// TestLeaseCountedOnIsTheRecords: the processor tells OnLease each lease
// end it counts on, and none is later than the record's lease_until under
// its token at that moment (but for the record's milliseconds): at the
// claim, also one whose answer was lost and whose retry found its own
// record (its lease runs from the put that took effect, not from the
// retry), and at each confirmed extension.
func TestLeaseCountedOnIsTheRecords(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		f := withFaults(t, b)
		f.inject("claim", loseResponse)
		b.effect = func(context.Context, effect.Input) (effect.Output, error) {
			time.Sleep(12 * time.Second) // past two heartbeats of the 10 s lease
			return effect.Output{Result: []byte("ok")}, nil
		}
		type belief struct {
			token       string
			until, held time.Time
			recordToken string
		}
		var mu sync.Mutex
		var got []belief
		b.proc.OnLease = func(key, token string, until time.Time) {
			out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("dedup"),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}, ConsistentRead: aws.Bool(true)})
			if err != nil {
				panic(err)
			}
			ms, _ := strconv.ParseInt(out.Item["lease_until"].(*types.AttributeValueMemberN).Value, 10, 64)
			mu.Lock()
			defer mu.Unlock()
			got = append(got, belief{token: token, until: until, held: time.UnixMilli(ms), recordToken: out.Item["token"].(*types.AttributeValueMemberS).Value})
		}
		r := b.proc.Process(context.Background(), msg("1", deposit), process.Hooks{})
		require.Equal(t, process.Delete, r.Action, "err: %v", r.Err)
		require.Equal(t, 2, f.count("claim"), "the claim was retried after its lost answer")
		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(got), 3, "the claim and two extensions")
		for i, g := range got {
			require.Equal(t, g.recordToken, g.token, "belief %d under the record's token", i)
			require.Less(t, g.until.Sub(g.held), time.Millisecond, "belief %d: counted on %s past the record's lease_until", i, g.until.Sub(g.held))
		}
	})
}
