package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/outbox"
)

// The tests of combined Writes (combine.go) run in a synctest bubble on
// memdynamo behind heldDB, which holds every request for a round trip of
// virtual time: a Write that starts while another's transaction is under
// way waits for it, and then goes with the others that waited.

const (
	combineQueue = "https://sqs.us-east-1.amazonaws.com/1/combine.fifo"
	combineTable = "outbox"
	businessTbl  = "business"
	roundTrip    = 10 * time.Millisecond
)

// heldDB holds each request for roundTrip and records the transactions;
// tx, when set, answers transaction k (from 0) instead of DynamoDB.
type heldDB struct {
	outbox.API
	mu    sync.Mutex
	sizes []int // each TransactWriteItems' actions, in order
	gets  int
	tx    func(k int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
}

func (h *heldDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	time.Sleep(roundTrip)
	h.mu.Lock()
	h.gets++
	h.mu.Unlock()
	return h.API.GetItem(ctx, in, o...)
}

func (h *heldDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	time.Sleep(roundTrip)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	k := len(h.sizes)
	h.sizes = append(h.sizes, len(in.TransactItems))
	tx := h.tx
	h.mu.Unlock()
	if tx != nil {
		return tx(k, in)
	}
	return h.API.TransactWriteItems(ctx, in, o...)
}

func (h *heldDB) transactions() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.sizes...)
}

// combineEnv is memdynamo with the outbox table and a business table (key
// pk), behind a heldDB.
func combineEnv(t *testing.T) (*memdynamo.DB, *heldDB) {
	t.Helper()
	db := memdynamo.New()
	ctx := context.Background()
	_, err := db.CreateTable(ctx, outboxschema.CreateTableInput(combineTable))
	require.NoError(t, err)
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(businessTbl), BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	return db, &heldDB{API: db}
}

// put is a business write of item pk, once (a condition).
func put(pk string) ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(businessTbl),
		Item:                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
		ConditionExpression: aws.String("attribute_not_exists(pk)")}}
}

// bump adds 1 to item pk's n: two bumps of one item name one item.
func bump(pk string) ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(businessTbl),
		Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}}
}

func cmsg(group, body string) outbox.Message {
	return outbox.Message{QueueURL: combineQueue, Group: group, Body: body, ID: "id-" + body}
}

// outboxBodies is group's messages in the outbox, by sequence number.
func outboxBodies(t *testing.T, db outbox.API, group string) []string {
	t.Helper()
	out, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(combineTable), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :z"),
		ExpressionAttributeNames:  map[string]string{"#pk": outboxschema.AttrPK, "#sk": outboxschema.AttrSK},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: combineQueue + "#" + group}, ":z": &ddbtypes.AttributeValueMemberN{Value: "0"}}})
	require.NoError(t, err)
	var bodies []string
	for i, it := range out.Items {
		require.Equal(t, strconv.Itoa(i+1), it[outboxschema.AttrSK].(*ddbtypes.AttributeValueMemberN).Value, "sequence numbers without a gap")
		bodies = append(bodies, it[outboxschema.AttrBody].(*ddbtypes.AttributeValueMemberS).Value)
	}
	return bodies
}

func exists(t *testing.T, db outbox.API, pk string) bool {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(businessTbl), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}})
	require.NoError(t, err)
	return out.Item != nil
}

// behind starts Write "first" (alone: its transaction is under way for a
// round trip), then each of writes once that has started, so that they
// queue behind it and go together next; it returns their errors.
func behind(t *testing.T, ob *outbox.Outbox, writes ...func(ctx context.Context) error) []error {
	t.Helper()
	ctx := context.Background()
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, ob.Write(ctx, []outbox.Message{cmsg("g", "first")}, put("first"))) })
	time.Sleep(roundTrip + roundTrip/2) // its head read done, its transaction under way
	for i, w := range writes {
		wg.Go(func() { errs[i] = w(ctx) })
		synctest.Wait() // queued, in this order
	}
	wg.Wait()
	return errs
}

func writeOf(ob *outbox.Outbox, name string, msgs int, writes ...ddbtypes.TransactWriteItem) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var ms []outbox.Message
		for i := range msgs {
			ms = append(ms, cmsg("g", fmt.Sprintf("%s.%d", name, i)))
		}
		return ob.Write(ctx, ms, writes...)
	}
}

// Writes of one group that wait behind a transaction go together in the
// next, each one's messages together and in the order they came.
func TestWritesOfOneGroupShareATransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, h := combineEnv(t)
		ob := outbox.New(h, combineTable)
		errs := behind(t, ob, writeOf(ob, "a", 2, put("a")), writeOf(ob, "b", 3, put("b")), writeOf(ob, "c", 1, put("c")))
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, []int{3, 3 + 1 + 6}, h.transactions(), "first alone; then a, b and c: 3 writes, the head, 6 messages")
		require.Equal(t, 1, h.gets, "the head is read once: the line knows it after its transaction")
		require.Equal(t, []string{"first", "a.0", "a.1", "b.0", "b.1", "b.2", "c.0"}, outboxBodies(t, db, "g"))
	})
}

// Sixteen writers of one group, each Write after the last: with combining
// they take a few transactions a round trip; without it every Write reads
// the head and all but one of each round fail on it.
func TestManyWritersOfOneGroup(t *testing.T) {
	for _, combine := range []bool{true, false} {
		t.Run(fmt.Sprint("combine=", combine), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, h := combineEnv(t)
				var opts []outbox.Option
				if !combine {
					opts = append(opts, outbox.WithoutCombining())
				}
				ob := outbox.New(h, combineTable, opts...)
				var wg sync.WaitGroup
				for w := range 16 {
					wg.Go(func() {
						for i := range 5 {
							name := fmt.Sprintf("w%02d-%d", w, i)
							assert.NoError(t, ob.Write(context.Background(), []outbox.Message{cmsg("g", name)}, put(name)))
						}
					})
				}
				wg.Wait()
				bodies := outboxBodies(t, db, "g")
				require.Len(t, bodies, 80)
				last := map[string]string{}
				for _, b := range bodies {
					require.Less(t, last[b[:3]], b, "each writer's messages in its order")
					last[b[:3]] = b
				}
				n := len(h.transactions())
				t.Logf("combine=%v: %d transactions, %d head reads for 80 Writes", combine, n, h.gets)
				if combine {
					require.LessOrEqual(t, n, 12, "about 16 Writes a transaction")
				} else {
					require.Greater(t, n, 80, "Writes that met a moved head retried")
				}
			})
		})
	}
}

// A Write whose own condition fails gets its cancellation alone, nothing
// of it written; the others of its transaction go again without it.
func TestACombinedWritesFailedConditionIsItsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, h := combineEnv(t)
		_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(businessTbl),
			Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "b"}}})
		require.NoError(t, err)
		ob := outbox.New(h, combineTable)
		errs := behind(t, ob, writeOf(ob, "a", 1, put("a")), writeOf(ob, "b", 2, bump("x"), put("b")), writeOf(ob, "c", 1, put("c")))
		require.NoError(t, errs[0])
		require.NoError(t, errs[2])
		var tce *ddbtypes.TransactionCanceledException
		require.ErrorAs(t, errs[1], &tce)
		codes := func() (cs []string) {
			for _, r := range tce.CancellationReasons {
				cs = append(cs, aws.ToString(r.Code))
			}
			return cs
		}()
		require.Equal(t, []string{"None", "ConditionalCheckFailed", "None", "None", "None"}, codes,
			"its writes, the head, its messages: the reasons of its own transaction")
		require.Equal(t, []int{3, 9, 5}, h.transactions(), "a, b and c together; then a and c")
		require.Equal(t, []string{"first", "a.0", "c.0"}, outboxBodies(t, db, "g"))
		require.True(t, exists(t, db, "a"))
		require.True(t, exists(t, db, "c"))
		out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(businessTbl),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
		require.NoError(t, err)
		require.Nil(t, out.Item, "nothing of b written")
	})
}

// A transaction whose outcome is unknown (its response lost, or an error
// that is no cancellation) is every one of its Writes' error.
func TestACombinedTransactionsUnknownOutcomeIsEveryones(t *testing.T) {
	for name, lose := range map[string]bool{"lost response": true, "error": false} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, h := combineEnv(t)
				h.tx = func(k int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					if k != 1 {
						return db.TransactWriteItems(context.Background(), in)
					}
					if lose {
						_, err := db.TransactWriteItems(context.Background(), in)
						require.NoError(t, err)
					}
					return nil, errors.New("connection reset")
				}
				ob := outbox.New(h, combineTable)
				errs := behind(t, ob, writeOf(ob, "a", 1, put("a")), writeOf(ob, "b", 1, put("b")))
				for _, err := range errs {
					require.ErrorContains(t, err, "connection reset")
				}
				want := []string{"first"}
				if lose {
					want = append(want, "a.0", "b.0")
				}
				require.Equal(t, want, outboxBodies(t, db, "g"))
				require.Len(t, h.transactions(), 2, "not retried")
			})
		})
	}
}

// Two Writes that name one item cannot share a transaction: seen from the
// keys (no request), or from DynamoDB's refusal (two puts of one item, whose
// key Write cannot know): each goes alone then. A Write whose own
// transaction is invalid gets ErrInvalid, the others are not failed.
func TestCombinedWritesOfOneItem(t *testing.T) {
	t.Run("same key: not combined", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db, h := combineEnv(t)
			ob := outbox.New(h, combineTable)
			errs := behind(t, ob, writeOf(ob, "a", 1, bump("acct")), writeOf(ob, "b", 1, bump("acct")), writeOf(ob, "c", 1, put("c")))
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, []int{3, 3, 5}, h.transactions(), "a alone; b and c together")
			require.Equal(t, []string{"first", "a.0", "b.0", "c.0"}, outboxBodies(t, db, "g"))
		})
	})
	t.Run("refused together: each alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db, h := combineEnv(t)
			ob := outbox.New(h, combineTable)
			same := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(businessTbl),
				Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "same"}}}}
			bad := ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(businessTbl),
				Key:              map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "bad"}},
				UpdateExpression: aws.String("SET #n = :v"), ExpressionAttributeNames: map[string]string{"#n": "n"}}} // :v undefined
			errs := behind(t, ob, writeOf(ob, "a", 1, same), writeOf(ob, "b", 1, same), writeOf(ob, "c", 1, bad), writeOf(ob, "d", 1, put("d")))
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
			require.ErrorIs(t, errs[2], outbox.ErrInvalid)
			require.NoError(t, errs[3])
			require.Equal(t, []int{3, 9, 3, 3, 3, 3}, h.transactions(), "a, b, c and d refused together; each alone")
			require.Equal(t, []string{"first", "a.0", "b.0", "d.0"}, outboxBodies(t, db, "g"))
		})
	})
}

// A transaction holds at most 100 actions: the Writes waiting past that go
// in the next, in order.
func TestCombinedWritesSplitAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, h := combineEnv(t)
		ob := outbox.New(h, combineTable)
		var ws []func(context.Context) error
		for i := range 30 {
			ws = append(ws, writeOf(ob, fmt.Sprintf("w%02d", i), 3, put(fmt.Sprint("w", i)))) // 4 actions each
		}
		for _, err := range behind(t, ob, ws...) {
			require.NoError(t, err)
		}
		require.Equal(t, []int{3, 1 + 24*4, 1 + 6*4}, h.transactions())
		bodies := outboxBodies(t, db, "g")
		require.Len(t, bodies, 91)
		for i := range 30 {
			require.Equal(t, fmt.Sprintf("w%02d.0", i), bodies[1+3*i])
		}
	})
}

// A waiting Write whose context ends leaves at once, nothing of it
// written, and the others go on. One whose context ends while its
// combined transaction is under way returns, and the transaction goes on
// for the others, the driver's own context ending included.
func TestCombinedWriteLeaving(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, h := combineEnv(t)
		ob := outbox.New(h, combineTable)
		ctxA, cancelA := context.WithCancel(context.Background())
		ctxB, cancelB := context.WithCancel(context.Background())
		ctxC, cancelC := context.WithCancel(context.Background())
		var leftA, leftC time.Duration
		start := time.Now()
		errs := behind(t, ob,
			func(context.Context) error {
				err := writeOf(ob, "a", 1, put("a"))(ctxA)
				leftA = time.Since(start)
				return err
			},
			func(context.Context) error {
				cancelA() // a leaves while waiting
				return writeOf(ob, "b", 1, put("b"))(ctxB)
			},
			func(context.Context) error {
				go func() {
					time.Sleep(roundTrip) // first has committed; b (driving), c and d are under way
					cancelB()
					cancelC()
				}()
				err := writeOf(ob, "c", 1, put("c"))(ctxC)
				leftC = time.Since(start)
				return err
			},
			writeOf(ob, "d", 1, put("d")))
		require.ErrorIs(t, errs[0], context.Canceled)
		require.Less(t, leftA, 2*roundTrip, "a left before first's transaction ended")
		require.NoError(t, errs[1], "b's transaction committed")
		require.ErrorIs(t, errs[2], context.Canceled, "c left while its transaction was under way")
		require.Less(t, leftC, 3*roundTrip, "c left before its transaction ended")
		require.NoError(t, errs[3])
		require.Equal(t, []int{3, 7}, h.transactions())
		require.Equal(t, []string{"first", "b.0", "c.0", "d.0"}, outboxBodies(t, db, "g"), "b, c and d committed; a not")
		require.False(t, exists(t, db, "a"))
	})
}

// Writes of several groups go alone: groups taken in any order never wait
// on each other.
func TestWritesOfSeveralGroupsDoNotWaitOnEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, h := combineEnv(t)
		ob := outbox.New(h, combineTable)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 5 {
					var msgs []outbox.Message
					switch w % 3 {
					case 0:
						msgs = []outbox.Message{cmsg("x", fmt.Sprintf("w%d-%d-x", w, i)), cmsg("y", fmt.Sprintf("w%d-%d-y", w, i))}
					case 1:
						msgs = []outbox.Message{cmsg("y", fmt.Sprintf("w%d-%d-y", w, i)), cmsg("x", fmt.Sprintf("w%d-%d-x", w, i))}
					default:
						msgs = []outbox.Message{cmsg("x", fmt.Sprintf("w%d-%d-x", w, i))}
					}
					assert.NoError(t, ob.Write(context.Background(), msgs))
				}
			})
		}
		wg.Wait()
		require.Len(t, outboxBodies(t, db, "x"), 40)
		require.Len(t, outboxBodies(t, db, "y"), 30)
	})
}

// gatedDB holds the first transaction until open is closed.
type gatedDB struct {
	dbAPI
	open    chan struct{}
	reached chan struct{} // closed when the first transaction is held
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	g.mu.Lock()
	first := len(g.sizes) == 0
	g.sizes = append(g.sizes, len(in.TransactItems))
	g.mu.Unlock()
	if first {
		close(g.reached)
		<-g.open
	}
	return g.dbAPI.TransactWriteItems(ctx, in, o...)
}

// The combined transaction against DynamoDB Local as against memdynamo:
// its cancellation reasons tell the Write whose condition failed, the
// others commit without it, and two Writes of one item go alone.
func TestCombinedWritesContract(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		item := func(pk string) map[string]ddbtypes.AttributeValue {
			return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberN{Value: "1"}}
		}
		once := func(pk string) ddbtypes.TransactWriteItem { // a business item in the outbox table, once
			return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &e.table, Item: item(pk), ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		}
		again := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &e.table, Item: item("same")}}
		_, err := e.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{once("taken")}})
		require.NoError(t, err)
		type write struct {
			body string
			w    ddbtypes.TransactWriteItem
		}
		// run has the Writes of group go together behind the first's
		// transaction and returns their errors and the transactions' sizes.
		run := func(group string, writes ...write) ([]error, []int) {
			g := &gatedDB{dbAPI: e.db, open: make(chan struct{}), reached: make(chan struct{})}
			ob := outbox.New(g, e.table)
			errs := make([]error, len(writes))
			var wg sync.WaitGroup
			for i, w := range writes {
				wg.Go(func() { errs[i] = ob.Write(ctx, []outbox.Message{msg(e.q1, group, w.body)}, w.w) })
				if i == 0 {
					<-g.reached
				}
				for i > 0 && ob.Waiting(e.q1, group) < i {
					time.Sleep(time.Millisecond)
				}
			}
			close(g.open)
			wg.Wait()
			return errs, g.sizes
		}

		errs, sizes := run("g", write{"first", once("first")}, write{"a", once("a")}, write{"b", once("taken")}, write{"c", once("c")})
		var tce *ddbtypes.TransactionCanceledException
		require.ErrorAs(t, errs[2], &tce)
		require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[0].Code))
		require.Len(t, tce.CancellationReasons, 3, "b's write, the head, b's message")
		require.NoError(t, errors.Join(errs[0], errs[1], errs[3]))
		require.Equal(t, []int{3, 7, 5}, sizes, "first; a, b and c (refused: b's condition); a and c")

		errs, sizes = run("h", write{"first", once("first-h")}, write{"d", again}, write{"e", again})
		require.NoError(t, errors.Join(errs...))
		require.Equal(t, []int{3, 5, 3, 3}, sizes, "first; d and e (refused: one item); each alone")

		r := e.relay()
		r.PerGroup = 50
		_, err = r.Sweep(ctx)
		require.NoError(t, err)
		bodies, _ := e.received(t, e.q1)
		require.Equal(t, []string{"first", "a", "c"}, bodies["g"])
		require.Equal(t, []string{"first", "d", "e"}, bodies["h"])
	})
}

// A transaction takes at most 4 MB: the Writes waiting past that go in the
// next, in order; a Write that DynamoDB's limits refuse alone (an item over
// 400 KB) gets ErrInvalid, nothing sent for it, and the others go on.
func TestCombinedWritesSplitAtFourMB(t *testing.T) {
	big := func(pk string, n int) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(businessTbl), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "pad": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", n)}}}}
	}
	for name, tc := range map[string]struct {
		invalid int // the Write over 400 KB, or -1
		sizes   []int
	}{
		"12 of 350 KB":           {-1, []int{3, 1 + 2*11, 3}},
		"the second over 400 KB": {1, []int{3, 3, 1 + 2*10}},
		"the fourth over 400 KB": {3, []int{3, 1 + 2*3, 1 + 2*8}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, h := combineEnv(t)
				ob := outbox.New(h, combineTable)
				var ws []func(context.Context) error
				for i := range 12 {
					n := 350_000
					if i == tc.invalid {
						n = 410_000
					}
					ws = append(ws, writeOf(ob, fmt.Sprintf("w%02d", i), 1, big(fmt.Sprint("w", i), n)))
				}
				errs := behind(t, ob, ws...)
				var want []string
				for i, err := range errs {
					if i == tc.invalid {
						require.ErrorIs(t, err, outbox.ErrInvalid)
						require.ErrorContains(t, err, "400 KB")
						continue
					}
					require.NoError(t, err, i)
					want = append(want, fmt.Sprintf("w%02d.0", i))
				}
				require.Equal(t, tc.sizes, h.transactions(), "first; then as many as 4 MB takes, the invalid one never sent")
				require.Equal(t, append([]string{"first"}, want...), outboxBodies(t, db, "g"))
			})
		})
	}
}
