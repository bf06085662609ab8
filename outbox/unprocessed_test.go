package outbox_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// batchRead is one BatchGetItem call as the relay made it: the keys it
// asked for and those the answer left unprocessed ("pk/sk").
type batchRead struct{ asked, left []string }

// readsDB records the relay's reads of the table: every BatchGetItem and
// the Queries of the table itself (not of the pending index). With
// throttle, the first BatchGetItem leaves every other key it answered
// unprocessed (one in three), as DynamoDB may when throttled (not only past 16 MB).
type readsDB struct {
	dbAPI
	table    string
	throttle bool

	mu      sync.Mutex
	batches []batchRead
	queries []string // pk of each Query of the table
}

func keyOf(k map[string]ddbtypes.AttributeValue) string {
	return k[outboxschema.AttrPK].(*ddbtypes.AttributeValueMemberS).Value + "/" + k[outboxschema.AttrSK].(*ddbtypes.AttributeValueMemberN).Value
}

func keysOf(ks []map[string]ddbtypes.AttributeValue) []string {
	var out []string
	for _, k := range ks {
		out = append(out, keyOf(k))
	}
	return out
}

func (d *readsDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := d.dbAPI.BatchGetItem(ctx, in, opts...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && d.throttle && len(d.batches) == 0 {
		var kept []map[string]ddbtypes.AttributeValue
		un := out.UnprocessedKeys[d.table]
		un.ConsistentRead = in.RequestItems[d.table].ConsistentRead
		for i, it := range out.Responses[d.table] {
			if i%3 != 1 {
				kept = append(kept, it)
				continue
			}
			un.Keys = append(un.Keys, map[string]ddbtypes.AttributeValue{outboxschema.AttrPK: it[outboxschema.AttrPK], outboxschema.AttrSK: it[outboxschema.AttrSK]})
		}
		out.Responses[d.table] = kept
		if out.UnprocessedKeys == nil {
			out.UnprocessedKeys = map[string]ddbtypes.KeysAndAttributes{}
		}
		out.UnprocessedKeys[d.table] = un
	}
	b := batchRead{asked: keysOf(in.RequestItems[d.table].Keys)}
	if err == nil {
		b.left = keysOf(out.UnprocessedKeys[d.table].Keys)
	}
	d.batches = append(d.batches, b)
	return out, err
}

func (d *readsDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if in.IndexName == nil {
		d.mu.Lock()
		d.queries = append(d.queries, in.ExpressionAttributeValues[":pk"].(*ddbtypes.AttributeValueMemberS).Value)
		d.mu.Unlock()
	}
	return d.dbAPI.Query(ctx, in, opts...)
}

// sweepReadsUnprocessedKeys writes groups of ten messages of size bytes,
// sweeps once and checks that the relay asked for the keys a BatchGetItem
// left unprocessed in its next BatchGetItem, exactly those, and read no
// group by Query instead; and that the sweep published every message, once,
// in its group's order.
func sweepReadsUnprocessedKeys(t *testing.T, e *env, d *readsDB, groups, size int) {
	t.Helper()
	ctx := context.Background()
	ob := outbox.New(e.db, e.table)
	want := map[string][]string{}
	for g := range groups {
		group := fmt.Sprint("g", g)
		var msgs []outbox.Message
		for i := range 10 {
			body := bigBody(fmt.Sprint(group, "-", i, "-"), size)
			msgs = append(msgs, outbox.Message{QueueURL: e.q1, Group: group, Body: body, ID: fmt.Sprint("id-", group, "-", i)})
			want[group] = append(want[group], body)
		}
		require.NoError(t, ob.Write(ctx, msgs))
	}
	d.table = e.table
	r := &outbox.Relay{DB: d, SQS: e.sqs, Table: e.table}
	round, err := r.Sweep(ctx)
	require.NoError(t, err)

	calls := len(d.batches) // (require.Len would print every key)
	require.Equal(t, 2, calls, "one BatchGetItem, and one for the keys it left unprocessed")
	first, again := d.batches[0], d.batches[1]
	require.Len(t, first.asked, groups*10, "every group's ten keys in one request")
	require.NotEmpty(t, first.left, "the answer left keys unprocessed")
	require.Equal(t, first.left, again.asked, "the keys left unprocessed, asked for again as they came back")
	require.Empty(t, again.left)
	require.Empty(t, d.queries, "no group read again by Query: its keys were read")
	require.Equal(t, groups*10, round.Published, "every message in the one sweep")
	require.Zero(t, round.Errors)

	round, err = r.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, round.Published, "nothing left")
	bodies := e.receivedAll(t, e.q1, groups*10)
	for g, w := range want { // bodies of 250 KiB: compare counts first, so that a failure prints
		require.Len(t, bodies[g], len(w), "group %s: each message once", g)
	}
	require.True(t, reflect.DeepEqual(want, bodies), "each message once, in its group's order")
}

// TestUnprocessedKeysAreReadAgainByKey: a sweep over 8 groups of ten
// messages of 250 KiB asks for 80 keys, about 20 MB; DynamoDB answers 16 MB
// at most and leaves the rest in UnprocessedKeys (memdynamo's
// TestBatchGetItemResponseLimit holds memdynamo and DynamoDB Local to it).
// The relay asks for exactly those keys again: the lanes they belong to are
// read whole, in the same sweep, without a Query each.
func TestUnprocessedKeysAreReadAgainByKey(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		d := &readsDB{dbAPI: e.db}
		sweepReadsUnprocessedKeys(t, e, d, 8, 250*1024)
	})
}

// TestThrottledKeysAreReadAgainByKey: DynamoDB may also leave keys
// unprocessed when throttled, anywhere in the request (here every other
// one in three, so groups have gaps): the relay reads them as it reads those past
// 16 MB.
func TestThrottledKeysAreReadAgainByKey(t *testing.T) {
	e := newEnv(t, memdynamo.New(), memsqs.New())
	d := &readsDB{dbAPI: e.db, throttle: true}
	sweepReadsUnprocessedKeys(t, e, d, 3, 100)
	require.True(t, slices.ContainsFunc(d.batches[0].left, func(k string) bool { return k[len(k)-2:] == "/1" }), "a group's first message among them")
}
