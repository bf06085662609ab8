package memdynamo_test

// These tests pin memdynamo to DynamoDB: every case runs against the
// in-memory implementation and against DynamoDB Local, with the same
// expectation. A case where DynamoDB fails must fail in memory too.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// DB is what both implementations offer.
type DB interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DeleteTable(context.Context, *dynamodb.DeleteTableInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DescribeTimeToLive(context.Context, *dynamodb.DescribeTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var (
	_ DB = (*memdynamo.DB)(nil)
	_ DB = (*dynamodb.Client)(nil)
)

// each runs f against memdynamo and against DynamoDB Local (skipped without
// an endpoint unless EXACTLY_REQUIRE_INTEGRATION=1).
func each(t *testing.T, f func(t *testing.T, db DB)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, memdynamo.New())
	})
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		f(t, testenv.DynamoDB(t))
	})
}

func newTable(t *testing.T, db DB) string {
	t.Helper()
	name := testenv.Name("md")
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return name
}

type V = map[string]types.AttributeValue

func S(v string) types.AttributeValue     { return &types.AttributeValueMemberS{Value: v} }
func N(v string) types.AttributeValue     { return &types.AttributeValueMemberN{Value: v} }
func B(v string) types.AttributeValue     { return &types.AttributeValueMemberB{Value: []byte(v)} }
func SS(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
func NS(v ...string) types.AttributeValue { return &types.AttributeValueMemberNS{Value: v} }
func L(v ...types.AttributeValue) types.AttributeValue {
	return &types.AttributeValueMemberL{Value: v}
}
func M(v V) types.AttributeValue { return &types.AttributeValueMemberM{Value: v} }

var (
	T    types.AttributeValue = &types.AttributeValueMemberBOOL{Value: true}
	NULL types.AttributeValue = &types.AttributeValueMemberNULL{Value: true}
)

// outcome classifies an error as the tests compare it.
func outcome(err error) string {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	var rnf *types.ResourceNotFoundException
	var ipm *types.IdempotentParameterMismatchException
	var api smithy.APIError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ccf):
		return "ccf"
	case errors.As(err, &tce):
		return "cancelled"
	case errors.As(err, &rnf):
		return "notfound"
	case errors.As(err, &ipm):
		return "mismatch"
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException":
		return "validation"
	}
	return "error: " + err.Error()
}

// render prints an item canonically (sorted names, sets sorted).
func render(it V) string {
	if it == nil {
		return "<none>"
	}
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(k + "=" + renderValue(it[k]))
	}
	return b.String() + "}"
}

func renderValue(v types.AttributeValue) string {
	sorted := func(s []string) string {
		s = append([]string(nil), s...)
		sort.Strings(s)
		return strings.Join(s, ",")
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", x.Value)
	case *types.AttributeValueMemberN:
		return "N" + x.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B%q", x.Value)
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL%v", x.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS[" + sorted(x.Value) + "]"
	case *types.AttributeValueMemberNS:
		return "NS[" + sorted(x.Value) + "]"
	case *types.AttributeValueMemberBS:
		s := make([]string, len(x.Value))
		for i, b := range x.Value {
			s[i] = string(b)
		}
		return "BS[" + sorted(s) + "]"
	case *types.AttributeValueMemberL:
		s := make([]string, len(x.Value))
		for i, e := range x.Value {
			s[i] = renderValue(e)
		}
		return "L[" + strings.Join(s, ",") + "]"
	case *types.AttributeValueMemberM:
		return "M" + render(x.Value)
	}
	return fmt.Sprintf("%T", v)
}

func get(t *testing.T, db DB, table, pk string) V {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, Key: V{"pk": S(pk)}, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func base(pk string) V {
	return V{
		"pk": S(pk), "s": S("abc"), "u": S("é"), "n": N("5"), "b": T, "ss": SS("a", "b"),
		"l": L(N("1"), S("a")), "m": M(V{"k": S("v")}), "bin": B("xyz"), "z": NULL,
	}
}

func TestConditionExpressions(t *testing.T) {
	t.Parallel()
	v := func(kv ...any) V {
		out := V{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return out
	}
	cases := []struct {
		cond  string
		names map[string]string
		vals  V
		want  string // ok, ccf, validation
	}{
		// comparisons and types
		{"n = :v", nil, v(":v", N("5")), "ok"},
		{"n = :v", nil, v(":v", N("5.00")), "ok"},
		{"n = :v", nil, v(":v", N("50e-1")), "ok"},
		{"n < :v", nil, v(":v", N("10")), "ok"}, // numeric, not lexical
		{"n > :v", nil, v(":v", N("-10")), "ok"},
		{"n >= :v", nil, v(":v", N("5")), "ok"},
		{"n <= :v", nil, v(":v", N("4.999")), "ccf"},
		{"s < :v", nil, v(":v", S("abd")), "ok"},
		{"s = :v", nil, v(":v", N("1")), "ccf"},
		{"s <> :v", nil, v(":v", N("1")), "ok"},
		{"s < :v", nil, v(":v", N("1")), "ccf"},
		{"NOT s < :v", nil, v(":v", N("1")), "ok"},
		{"b < :v", nil, v(":v", N("1")), "ccf"},
		{"n = :v", nil, v(":v", T), "ccf"},
		{"n < :v", nil, v(":v", T), "validation"},
		{"n < :v", nil, v(":v", SS("a")), "validation"},
		{"n < :v", nil, v(":v", L(S("a"))), "validation"},
		{"bin < :v", nil, v(":v", B("xz")), "ok"},
		{"ss = :v", nil, v(":v", SS("b", "a")), "ok"},
		{"l = :v", nil, v(":v", L(N("1.0"), S("a"))), "ok"},
		{"m = :v", nil, v(":v", M(V{"k": S("v")})), "ok"},
		{"z = :v", nil, v(":v", NULL), "ok"},
		{":a = :v", nil, v(":v", N("1"), ":a", N("1")), "ok"},
		{":v = :v", nil, v(":v", N("1")), "ok"},
		{"n = n", nil, nil, "validation"},
		{"#a = #b", map[string]string{"#a": "n", "#b": "n"}, nil, "validation"},
		// missing attributes
		{"nope = :v", nil, v(":v", S("a")), "ccf"},
		{"nope <> :v", nil, v(":v", S("a")), "ok"},
		{"NOT nope = :v", nil, v(":v", S("a")), "ok"},
		{"nope < :v", nil, v(":v", S("a")), "ccf"},
		{"NOT nope < :v", nil, v(":v", S("a")), "ok"},
		{"nope IN (:v)", nil, v(":v", N("1")), "ccf"},
		{"NOT nope BETWEEN :v AND :w", nil, v(":v", N("1"), ":w", N("2")), "ok"},
		{"size(nope) <> :v", nil, v(":v", N("1")), "ok"},
		{"size(nope) = :v", nil, v(":v", N("1")), "ccf"},
		// functions
		{"attribute_exists(s)", nil, nil, "ok"},
		{"attribute_exists (s)", nil, nil, "ok"},
		{"attribute_not_exists(s)", nil, nil, "ccf"},
		{"attribute_not_exists(nope)", nil, nil, "ok"},
		{"attribute_exists(:v)", nil, v(":v", S("a")), "validation"},
		{"ATTRIBUTE_EXISTS(s)", nil, nil, "validation"},
		{"begins_with(s, :v)", nil, v(":v", S("ab")), "ok"},
		{"begins_with(s, :v)", nil, v(":v", S("b")), "ccf"},
		{"begins_with(s, :v)", nil, v(":v", N("5")), "validation"},
		{"begins_with(s, :v)", nil, v(":v", B("a")), "ccf"},
		{"begins_with(n, :v)", nil, v(":v", S("5")), "ccf"},
		{"begins_with(bin, :v)", nil, v(":v", B("xy")), "ok"},
		{"contains(s, :v)", nil, v(":v", S("bc")), "ok"},
		{"contains(ss, :v)", nil, v(":v", S("a")), "ok"},
		{"contains(ss, :v)", nil, v(":v", N("1")), "ccf"},
		{"contains(l, :v)", nil, v(":v", N("1.0")), "ok"},
		{"contains(l, :v)", nil, v(":v", S("b")), "ccf"},
		{"attribute_type(s, :t)", nil, v(":t", S("S")), "ok"},
		{"attribute_type(s, :t)", nil, v(":t", S("N")), "ccf"},
		{"attribute_type(ss, :t)", nil, v(":t", S("SS")), "ok"},
		{"attribute_type(s, :t)", nil, v(":t", S("X")), "validation"},
		{"size(s) = :v", nil, v(":v", N("3")), "ok"},
		{"size(u) = :v", nil, v(":v", N("1")), "ok"}, // characters, not bytes
		{"size(n) = :v", nil, v(":v", N("1")), "ccf"},
		{"size(n) <> :v", nil, v(":v", N("1")), "ok"},
		{"size(ss) = :v", nil, v(":v", N("2")), "ok"},
		{"size(m) > :v", nil, v(":v", N("0")), "ok"},
		// BETWEEN and IN
		{"n BETWEEN :a AND :b", nil, v(":a", N("1"), ":b", N("6")), "ok"},
		{"n BETWEEN :a AND :b", nil, v(":a", N("5"), ":b", N("5")), "ok"},
		{"n BETWEEN :a AND :b", nil, v(":a", N("6"), ":b", N("1")), "validation"},
		{"s BETWEEN :a AND :b", nil, v(":a", N("1"), ":b", N("6")), "ccf"},
		{"n in (:a, :b)", nil, v(":a", N("1"), ":b", N("5")), "ok"},
		{"n IN (:a)", nil, v(":a", N("1")), "ccf"},
		// paths
		{"m.k = :v", nil, v(":v", S("v")), "ok"},
		{"l[1] = :v", nil, v(":v", S("a")), "ok"},
		{"l[5] = :v", nil, v(":v", S("a")), "ccf"},
		{"#m.#k = :v", map[string]string{"#m": "m", "#k": "k"}, v(":v", S("v")), "ok"},
		// logic and precedence: OR binds looser than AND, NOT tighter
		{"attribute_exists(s) and not attribute_exists(q) or s = :v", nil, v(":v", S("a")), "ok"},
		{"attribute_not_exists(s) AND n = :v OR n = :v", nil, v(":v", N("5")), "ok"},
		{"attribute_not_exists(s) AND (n = :v OR n = :v)", nil, v(":v", N("5")), "ccf"},
		{"NOT attribute_exists(s) OR n = :v", nil, v(":v", N("5")), "ok"},
		{"NOT (attribute_exists(s) OR n = :v)", nil, v(":v", N("5")), "ccf"},
		{"(n = :v)", nil, v(":v", N("5")), "ok"},
		// the ledger's claim condition, literally
		{"attribute_not_exists(#pk) OR #exp < :now_s OR (#st = :inprog AND #lu < :now_ms)",
			map[string]string{"#pk": "pk", "#exp": "n", "#st": "s", "#lu": "n"},
			v(":now_s", N("5"), ":inprog", S("abc"), ":now_ms", N("6")), "ok"},
		// syntax, placeholders, reserved words
		{"n = :v OR", nil, v(":v", N("1")), "validation"},
		{"s AND n = :v", nil, v(":v", N("5")), "validation"},
		{"size(s) + :v = :v", nil, v(":v", N("5")), "validation"},
		{"n = :v", nil, v(":v", N("5"), ":w", S("x")), "validation"},            // unused value
		{"n = :v", map[string]string{"#x": "x"}, v(":v", N("5")), "validation"}, // unused name
		{"n = :v", map[string]string{}, v(":v", N("5")), "validation"},          // empty names map
		{"#a = :v", nil, v(":v", N("5")), "validation"},                         // undefined name
		{"n = :w", nil, v(":v", N("5")), "validation"},                          // undefined value
		{"status = :v", nil, v(":v", S("x")), "validation"},                     // reserved word
		{"Status = :v", nil, v(":v", S("x")), "validation"},
		{"#s = :v", map[string]string{"#s": "status"}, v(":v", S("x")), "ccf"},
		{"_x = :v", nil, v(":v", N("5")), "validation"},
		{"x9 = :v", nil, v(":v", N("5")), "ccf"},
		{"", nil, nil, "validation"},
		{"n = :v", nil, v(":v", SS("a", "a")), "validation"}, // duplicate set members
		{"n = :v", nil, v(":v", N("1e126")), "validation"},
	}
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: base("x")})
		require.NoError(t, err)
		for _, c := range cases {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: &table, Item: base("x"), ConditionExpression: aws.String(c.cond),
				ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.vals,
			})
			require.Equal(t, c.want, outcome(err), "condition %q names %v values %v", c.cond, c.names, render(c.vals))
		}
		// Nothing a failed condition touched changed.
		require.Equal(t, render(base("x")), render(get(t, db, table, "x")))
	})
}

func TestUpdateExpressions(t *testing.T) {
	t.Parallel()
	one := V{":v": N("1")}
	cases := []struct {
		update string
		cond   string
		names  map[string]string
		vals   V
		want   string // an item rendering, or an outcome
	}{
		{"SET n = n + :v", "", nil, one, "n=N6"},
		{"SET n = n - :v", "", nil, V{":v": N("0.5")}, "n=N4.5"},
		{"SET n = :v + :v", "", nil, one, "n=N2"},
		{"SET a = :v - :v", "", nil, one, "a=N0"},
		{"SET n = nope + :v", "", nil, one, "validation"},
		{"SET n = s + :v", "", nil, one, "validation"},
		{"SET a = if_not_exists(n, :v)", "", nil, one, "a=N5"},
		{"SET a = if_not_exists(nope, :v) + :v", "", nil, one, "a=N2"},
		{"SET a = if_not_exists(nope, n)", "", nil, nil, "a=N5"},
		{"SET a = list_append(l, :l)", "", nil, V{":l": L(S("c"))}, `a=L[N1,S"a",S"c"]`},
		{"set a = :v remove s", "", nil, one, "a=N1 s=<none>"},
		{"SET a = :v ADD nn :v", "", nil, one, "a=N1 nn=N1"},
		{"ADD n :v", "", nil, V{":v": N("-7")}, "n=N-2"},
		{"ADD ss :v", "", nil, V{":v": SS("c", "a")}, "ss=SS[a,b,c]"},
		{"ADD ns :v", "", nil, V{":v": NS("1", "2")}, "ns=NS[1,2]"},
		{"DELETE ss :v", "", nil, V{":v": SS("a")}, "ss=SS[b]"},
		{"DELETE ss :v", "", nil, V{":v": SS("a", "b")}, "ss=<none>"},
		{"DELETE nope :v", "", nil, V{":v": SS("a")}, "nope=<none>"},
		{"ADD s :v", "", nil, one, "validation"},
		{"ADD b :v", "", nil, one, "validation"},
		{"ADD n :v", "", nil, V{":v": S("1")}, "validation"},
		{"ADD ss :v", "", nil, V{":v": NS("1")}, "validation"},
		{"DELETE n :v", "", nil, one, "validation"},
		{"SET n = :v, n = :v", "", nil, one, "validation"},
		{"SET n = :v REMOVE n", "", nil, one, "validation"},
		{"SET #a = :v, #b = :v", "", map[string]string{"#a": "q", "#b": "q"}, one, "validation"},
		{"SET a = :v SET b = :v", "", nil, one, "validation"},
		{"SET pk = :v", "", nil, V{":v": S("y")}, "validation"},
		{"SET a = :v,", "", nil, one, "validation"},
		{"SET status = :v", "", nil, one, "validation"},
		{"SET #st = :v", "", map[string]string{"#st": "status"}, one, "status=N1"},
		{"SET a = :v", "nope = :v", nil, one, "ccf"},
		{"SET a = :v", "n = :v", nil, one, "ccf"},
		{"SET a = :v", "n <> :v", nil, one, "a=N1"},
		{"SET a = :v", "", nil, V{":v": N("1"), ":w": N("2")}, "validation"},
		{"SET n = n + :v", "", nil, V{":v": N("99999999999999999999999999999999999999")}, "validation"}, // 39 digits
		{"SET n = :a + :v", "", nil, V{":a": N("12345678901234567890123456789012345678"), ":v": N("0.1")}, "validation"},
		{"SET n = n + :v", "", nil, V{":v": N("0.25")}, "n=N5.25"},
	}
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		for i, c := range cases {
			pk := fmt.Sprint("u", i)
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: base(pk)})
			require.NoError(t, err)
			in := &dynamodb.UpdateItemInput{
				TableName: &table, Key: V{"pk": S(pk)}, UpdateExpression: aws.String(c.update),
				ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.vals,
			}
			if c.cond != "" {
				in.ConditionExpression = aws.String(c.cond)
			}
			_, err = db.UpdateItem(ctx, in)
			after := get(t, db, table, pk)
			if !strings.Contains(c.want, "=") {
				require.Equal(t, c.want, outcome(err), "update %q", c.update)
				require.Equal(t, render(base(pk)), render(after), "a failed update %q changed the item", c.update)
				continue
			}
			require.NoError(t, err, "update %q", c.update)
			for _, kv := range strings.Split(c.want, " ") {
				name, want, _ := strings.Cut(kv, "=")
				got := "<none>"
				if v, ok := after[name]; ok {
					got = renderValue(v)
				}
				require.Equal(t, want, got, "update %q: attribute %s", c.update, name)
			}
		}
	})
}

func TestNumbers(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"1.50": "1.5", "0010": "10", "1e3": "1000", "-0": "0", "+5": "5", "1E-2": "0.01",
		".5": "0.5", "5.": "5", "00.100": "0.1", "-12.340": "-12.34", "123": "123",
		"123456789012345678901234567890123456789": "validation",
		"1e126": "validation", "1e-131": "validation", " 5": "validation", "": "validation",
		"1e": "validation", "0x10": "validation", "NaN": "validation", "1.2.3": "validation",
		"9.9999999999999999999999999999999999999e125": "99999999999999999999999999999999999999" + strings.Repeat("0", 88),
		"1e-130": "0." + strings.Repeat("0", 129) + "1",
	}
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		for in, want := range cases {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("n" + in), "v": N(in)}})
			if want == "validation" {
				require.Equal(t, want, outcome(err), "number %q", in)
				continue
			}
			require.NoError(t, err, "number %q", in)
			require.Equal(t, "N"+want, renderValue(get(t, db, table, "n"+in)["v"]), "number %q", in)
		}
	})
}

func TestItemValidation(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		put := func(it V) string {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
			return outcome(err)
		}
		require.Equal(t, "validation", put(V{"pk": S("")}))
		require.Equal(t, "validation", put(V{"pk": N("1")}))
		require.Equal(t, "validation", put(V{"x": S("1")}))
		require.Equal(t, "ok", put(V{"pk": S("e"), "e": S("")}))
		require.Equal(t, "validation", put(V{"pk": S("e"), "e": SS()}))
		require.Equal(t, "validation", put(V{"pk": S("e"), "e": &types.AttributeValueMemberNULL{Value: false}}))
		require.Equal(t, "ok", put(V{"pk": S(strings.Repeat("k", 2048))}))
		require.Equal(t, "validation", put(V{"pk": S(strings.Repeat("k", 2049))}))
		big := strings.Repeat("x", 400*1024)
		require.Equal(t, "validation", put(V{"pk": S("big"), "b": S(big)}))
		require.Equal(t, "ok", put(V{"pk": S("big"), "b": S(big[:400*1024-20])}))

		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("e")}, ReturnValues: types.ReturnValueAllNew})
		require.Equal(t, "validation", outcome(err))
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("e")}, ExpressionAttributeNames: map[string]string{"#a": "a"}})
		require.Equal(t, "validation", outcome(err), "names without an expression")
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("e")}, ExpressionAttributeValues: V{":a": S("a")}})
		require.Equal(t, "validation", outcome(err), "values without an expression")
		_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: V{"pk": S("e"), "s": S("x")}})
		require.Equal(t, "validation", outcome(err), "a key with an extra attribute")
		_, err = db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("no-such-table-" + table), Key: V{"pk": S("e")}})
		require.Equal(t, "notfound", outcome(err))
		_, err = db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("no-such-table-" + table)})
		require.Equal(t, "notfound", outcome(err))
	})
}

func TestReturnValues(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		allOld := types.ReturnValuesOnConditionCheckFailureAllOld

		// ALL_OLD on a failed condition returns the blocking item...
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: base("x")})
		require.NoError(t, err)
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")},
			ConditionExpression: aws.String("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: allOld})
		var ccf *types.ConditionalCheckFailedException
		require.ErrorAs(t, err, &ccf)
		require.Equal(t, render(base("x")), render(ccf.Item))
		// ... on UpdateItem too, and nothing when there is no item.
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("x")},
			UpdateExpression: aws.String("SET a = :v"), ConditionExpression: aws.String("n = :w"),
			ExpressionAttributeValues: V{":v": N("1"), ":w": N("6")}, ReturnValuesOnConditionCheckFailure: allOld})
		require.ErrorAs(t, err, &ccf)
		require.Equal(t, render(base("x")), render(ccf.Item))
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("absent")},
			ConditionExpression: aws.String("attribute_exists(pk)"), ReturnValuesOnConditionCheckFailure: allOld})
		require.ErrorAs(t, err, &ccf)
		require.Empty(t, ccf.Item)
		// Without ALL_OLD no item comes back.
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")},
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		require.ErrorAs(t, err, &ccf)
		require.Empty(t, ccf.Item)

		// ReturnValues on success.
		out, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x"), "a": N("1")}, ReturnValues: types.ReturnValueAllOld})
		require.NoError(t, err)
		require.Equal(t, render(base("x")), render(out.Attributes))
		up, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("x")},
			UpdateExpression: aws.String("SET a = a + :v, b = :v"), ExpressionAttributeValues: V{":v": N("1")}, ReturnValues: types.ReturnValueAllNew})
		require.NoError(t, err)
		require.Equal(t, `{a=N2 b=N1 pk=S"x"}`, render(up.Attributes))
		up, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("x")},
			UpdateExpression: aws.String("SET a = a + :v"), ExpressionAttributeValues: V{":v": N("1")}, ReturnValues: types.ReturnValueUpdatedOld})
		require.NoError(t, err)
		require.Equal(t, `{a=N2}`, render(up.Attributes))
		del, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: V{"pk": S("x")}, ReturnValues: types.ReturnValueAllOld})
		require.NoError(t, err)
		require.Equal(t, `{a=N3 b=N1 pk=S"x"}`, render(del.Attributes))
		require.Nil(t, get(t, db, table, "x"))

		// An update of an absent item creates it, even with only REMOVE.
		_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("new")}, UpdateExpression: aws.String("REMOVE a")})
		require.NoError(t, err)
		require.Equal(t, `{pk=S"new"}`, render(get(t, db, table, "new")))

		// Projection.
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: base("p")})
		require.NoError(t, err)
		g, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: V{"pk": S("p")},
			ProjectionExpression: aws.String("#s, n, nope"), ExpressionAttributeNames: map[string]string{"#s": "s"}})
		require.NoError(t, err)
		require.Equal(t, `{n=N5 s=S"abc"}`, render(g.Item))
	})
}

func TestTransactWriteItems(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		allOld := types.ReturnValuesOnConditionCheckFailureAllOld
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: base("x")})
		require.NoError(t, err)
		tx := func(items ...types.TransactWriteItem) error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}
		failing := types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: V{"pk": S("x")},
			UpdateExpression: aws.String("SET a = :v"), ConditionExpression: aws.String("n = :w"),
			ExpressionAttributeValues: V{":v": N("1"), ":w": N("6")}, ReturnValuesOnConditionCheckFailure: allOld}}
		putOther := types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S("other")}}}

		// A failed condition cancels everything, with one reason per item.
		err = tx(failing, putOther, types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S("x2")},
			ConditionExpression: aws.String("attribute_exists(pk)"), ReturnValuesOnConditionCheckFailure: allOld}})
		var tce *types.TransactionCanceledException
		require.ErrorAs(t, err, &tce)
		require.Len(t, tce.CancellationReasons, 3)
		require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[0].Code))
		require.Equal(t, render(base("x")), render(tce.CancellationReasons[0].Item))
		require.Equal(t, "None", aws.ToString(tce.CancellationReasons[1].Code))
		require.Empty(t, tce.CancellationReasons[1].Item)
		require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[2].Code))
		require.Empty(t, tce.CancellationReasons[2].Item)
		require.Nil(t, get(t, db, table, "other"), "a cancelled transaction applied a write")
		require.Equal(t, render(base("x")), render(get(t, db, table, "x")))

		// A condition check failing cancels too.
		err = tx(putOther, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &table, Key: V{"pk": S("x")},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}})
		require.ErrorAs(t, err, &tce)
		require.Equal(t, "None", aws.ToString(tce.CancellationReasons[0].Code))
		require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[1].Code))
		require.Nil(t, get(t, db, table, "other"))

		// An update that cannot apply rejects the whole request.
		err = tx(failing, types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: V{"pk": S("x3")},
			UpdateExpression: aws.String("SET a = b + :v"), ExpressionAttributeValues: V{":v": N("1")}}})
		require.Equal(t, "validation", outcome(err))
		err = tx(types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: V{"pk": S("x")},
			UpdateExpression: aws.String("ADD s :v"), ExpressionAttributeValues: V{":v": N("1")}}}, putOther)
		require.Equal(t, "validation", outcome(err))
		require.Nil(t, get(t, db, table, "other"))

		// Static errors.
		require.Equal(t, "validation", outcome(tx(putOther, putOther)), "two operations on one item")
		require.Equal(t, "validation", outcome(tx(types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S("y")}, ConditionExpression: aws.String("a =")}})))
		require.Equal(t, "validation", outcome(tx(types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S("y")},
			ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: V{":v": N("1")}}})))
		require.Equal(t, "notfound", outcome(tx(types.TransactWriteItem{Put: &types.Put{TableName: aws.String("no-such-" + table), Item: V{"pk": S("y")}}})))

		// Success applies every write.
		require.NoError(t, tx(putOther,
			types.TransactWriteItem{Update: &types.Update{TableName: &table, Key: V{"pk": S("x")},
				UpdateExpression: aws.String("ADD n :v"), ConditionExpression: aws.String("n = :w"),
				ExpressionAttributeValues: V{":v": N("1"), ":w": N("5")}}},
			types.TransactWriteItem{Delete: &types.Delete{TableName: &table, Key: V{"pk": S("gone")}}},
		))
		require.NotNil(t, get(t, db, table, "other"))
		require.Equal(t, "N6", renderValue(get(t, db, table, "x")["n"]))

		// A ClientRequestToken makes a repeat a no-op, and a different request
		// under the same token an error.
		tok := testenv.Name("tok")
		add := func(n string) error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: &tok, TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: &table, Key: V{"pk": S("ctr")}, UpdateExpression: aws.String("ADD c :v"), ExpressionAttributeValues: V{":v": N(n)}}}}})
			return err
		}
		require.NoError(t, add("1"))
		require.NoError(t, add("1"))
		require.Equal(t, "N1", renderValue(get(t, db, table, "ctr")["c"]))
		require.Equal(t, "mismatch", outcome(add("2")))
		require.Equal(t, "N1", renderValue(get(t, db, table, "ctr")["c"]))
	})
}

func TestTables(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
		require.NoError(t, err)
		require.Equal(t, "pk", aws.ToString(d.Table.KeySchema[0].AttributeName))
		require.Equal(t, types.KeyTypeHash, d.Table.KeySchema[0].KeyType)
		require.Equal(t, types.ScalarAttributeTypeS, d.Table.AttributeDefinitions[0].AttributeType)

		ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
		require.NoError(t, err)
		require.Equal(t, types.TimeToLiveStatusDisabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table, TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)}})
		require.NoError(t, err)
		ttl, err = db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
		require.NoError(t, err)
		require.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
		require.Equal(t, "expires_at", aws.ToString(ttl.TimeToLiveDescription.AttributeName))
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table, TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)}})
		require.Equal(t, "validation", outcome(err), "enabling TTL twice")

		_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			BillingMode:          types.BillingModePayPerRequest})
		var inUse *types.ResourceInUseException
		require.ErrorAs(t, err, &inUse)
	})
}

// TestConcurrentAtomicity: concurrent conditional writes are atomic per item.
func TestConcurrentAtomicity(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		const workers, per = 8, 25
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("ctr")},
						UpdateExpression: aws.String("ADD c :one"), ExpressionAttributeValues: V{":one": N("1")}})
					assert.NoError(t, err)
					_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S(fmt.Sprint("once", i))},
						ConditionExpression: aws.String("attribute_not_exists(pk)")})
					if err == nil {
						mu.Lock()
						won++
						mu.Unlock()
					} else {
						assert.Equal(t, "ccf", outcome(err))
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, fmt.Sprintf("N%d", workers*per), renderValue(get(t, db, table, "ctr")["c"]))
		require.Equal(t, per, won)
	})
}

// TestUnsupported: what memdynamo does not model fails loudly.
func TestUnsupported(t *testing.T) {
	t.Parallel()
	db := memdynamo.New()
	ctx := context.Background()
	table := newTable(t, db)
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: V{"pk": S("x")},
		UpdateExpression: aws.String("SET m.k = :v"), ExpressionAttributeValues: V{":v": N("1")}})
	require.ErrorIs(t, err, memdynamo.ErrUnsupported)
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")},
		Expected: map[string]types.ExpectedAttributeValue{"pk": {Exists: aws.Bool(false)}}})
	require.ErrorIs(t, err, memdynamo.ErrUnsupported)
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("bad\xff")}})
	require.ErrorIs(t, err, memdynamo.ErrUnsupported)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = db.PutItem(cctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")}})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, db.Calls()["PutItem"], "calls are counted, failed ones too, but not those refused for a done context")
}

func TestLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, db DB) {
		ctx := context.Background()
		table := newTable(t, db)
		long := "attribute_exists(pk)" + strings.Repeat(" AND attribute_exists(pk)", 200)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: V{"pk": S("x")}, ConditionExpression: aws.String(long)})
		require.Equal(t, "validation", outcome(err), "an expression over 4 KB")

		// 20 items of 300 KB: over the 4 MB a transaction may carry.
		big := strings.Repeat("x", 300*1024)
		var items []types.TransactWriteItem
		for i := 0; i < 20; i++ {
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: V{"pk": S(fmt.Sprint("big", i)), "b": S(big)}}})
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		require.Equal(t, "validation", outcome(err), "a transaction over 4 MB")
		require.Nil(t, get(t, db, table, "big0"))
	})
}
