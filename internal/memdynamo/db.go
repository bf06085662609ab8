// Package memdynamo is an in-memory DynamoDB for fast tests. It implements the
// item and table operations this project uses, on the SDK's own input and
// output types, with DynamoDB's semantics where they matter for correctness:
// condition and update expressions evaluated atomically per item, ALL_OLD on
// a failed condition, all-or-nothing TransactWriteItems with cancellation
// reasons aligned to the items, ClientRequestToken idempotency, number
// canonicalisation, and the validation errors DynamoDB gives for unused or
// undefined placeholders, reserved words, overlapping update paths and key
// updates.
//
// Whatever it does not model (indexes, nested update paths, legacy
// parameters, UPDATED_* return values, ...) fails with an error wrapping
// ErrUnsupported instead of being guessed. It deletes expired items only
// when told to (SweepExpired, which the caller drives as DynamoDB's TTL
// sweeper would, at times it draws): until then, as in DynamoDB before its
// sweep, expired records stay readable.
//
// The same contract tests run against it and against DynamoDB Local, so that
// it cannot pass what DynamoDB fails. It is safe for concurrent use.
package memdynamo

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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// DB is an in-memory DynamoDB. The zero value is not usable; call New.
type DB struct {
	mu     sync.Mutex
	tables map[string]*table
	tokens map[string]txToken // ClientRequestToken -> request seen
	// tokenOrder is the tokens as they were recorded, oldest first: they
	// expire from its front. Scanning every token on every transaction
	// instead held the lock for a time that grew with the tokens (tens of
	// thousands in a bench run: a transaction took 2 to 4 times its
	// modelled latency under load).
	tokenOrder []tokenSeen
	calls      map[string]int
	units      int // write units consumed (see WriteUnits)
	now        func() time.Time
}

type table struct {
	name      string
	hashKey   string
	hashType  types.ScalarAttributeType
	rangeKey  string
	rangeType types.ScalarAttributeType
	created   time.Time
	ttlAttr   string
	ttlOn     bool
	stream    *types.StreamSpecification
	indexes   []*index
	items     map[string]item
}

type txToken struct {
	fingerprint string
	at          time.Time
}

type tokenSeen struct {
	token string
	at    time.Time
}

// expireTokens forgets the tokens recorded more than tokenWindow before
// now (under mu). Tokens are recorded in time order, so the expired ones
// are a prefix of tokenOrder.
func (db *DB) expireTokens(now time.Time) {
	i := 0
	for ; i < len(db.tokenOrder) && now.Sub(db.tokenOrder[i].at) > tokenWindow; i++ {
		s := db.tokenOrder[i]
		if v, ok := db.tokens[s.token]; ok && v.at.Equal(s.at) {
			delete(db.tokens, s.token)
		}
	}
	db.tokenOrder = db.tokenOrder[i:]
}

// recordToken remembers a transaction's token (under mu).
func (db *DB) recordToken(token, fingerprint string) {
	now := db.now()
	db.tokens[token] = txToken{fingerprint: fingerprint, at: now}
	db.tokenOrder = append(db.tokenOrder, tokenSeen{token: token, at: now})
}

// tokenWindow is how long DynamoDB remembers a ClientRequestToken.
const tokenWindow = 10 * time.Minute

// New returns an empty database.
func New() *DB {
	return &DB{tables: map[string]*table{}, tokens: map[string]txToken{}, calls: map[string]int{}, now: time.Now}
}

// Calls returns how many times each operation was called, by operation name
// (PutItem, UpdateItem, ...), including calls that failed.
func (db *DB) Calls() map[string]int {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := make(map[string]int, len(db.calls))
	for k, v := range db.calls {
		out[k] = v
	}
	return out
}

// WriteUnits returns the write capacity units consumed so far, counted as
// DynamoDB bills them: per item written, its size before or after the
// write, whichever is larger, rounded up to the next 1 KB (at least 1);
// twice that for an item of a TransactWriteItems. A PutItem, UpdateItem or
// DeleteItem whose condition fails consumes the same (the item as it is,
// at least 1); a cancelled transaction and a ConditionCheck are not
// counted.
func (db *DB) WriteUnits() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.units
}

// writeUnits is one item write's units (outside a transaction).
func writeUnits(old, next item) int {
	size := max(itemSize(old), itemSize(next))
	return max(1, (size+1023)/1024)
}

// enter counts the call, checks ctx and locks the database.
func (db *DB) enter(ctx context.Context, op string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, err)
	}
	db.mu.Lock()
	db.calls[op]++
	return db.mu.Unlock, nil
}

// enterTable is enter followed by table: the named table, locked.
func (db *DB) enterTable(ctx context.Context, op string, name *string) (*table, func(), error) {
	unlock, err := db.enter(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	t, err := db.table(name)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return t, unlock, nil
}

func (db *DB) table(name *string) (*table, error) { return tableSet(db.tables).table(name) }

// tableSet is the database's tables as a write found them.
type tableSet map[string]*table

func (ts tableSet) table(name *string) (*table, error) {
	if aws.ToString(name) == "" {
		return nil, validation("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
	}
	t, ok := ts[*name]
	if !ok {
		return nil, notFound()
	}
	return t, nil
}

// begin counts a write call, checks ctx and returns the tables as they
// are. The write validates its request and parses its expressions against
// them without the lock (most of a write's CPU: a transaction of three
// items spent about 50 µs under one lock, which serialised a 64-way
// benchmark), then takes it with lockFor to evaluate and apply: every
// condition is still evaluated and every item written under the one lock,
// so writes stay linearizable.
func (db *DB) begin(ctx context.Context, op string) (tableSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.calls[op]++
	return maps.Clone(tableSet(db.tables)), nil
}

// lockFor locks the database for writes prepared since begin: a table
// deleted (or created again) in between is not found, as it would have
// been had the write come after.
func (db *DB) lockFor(ws ...*write) (unlock func(), err error) {
	db.mu.Lock()
	for _, w := range ws {
		if db.tables[w.t.name] != w.t {
			db.mu.Unlock()
			return nil, notFound()
		}
	}
	return db.mu.Unlock, nil
}

// CreateTable creates a table with a hash key and an optional range key.
// Indexes and streams are not supported.
func (db *DB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	unlock, err := db.enter(ctx, "CreateTable")
	if err != nil {
		return nil, err
	}
	defer unlock()
	name := aws.ToString(in.TableName)
	if len(name) < 3 || len(name) > 255 {
		return nil, validation("TableName must be at least 3 characters long and at most 255 characters long")
	}
	if _, ok := db.tables[name]; ok {
		return nil, &types.ResourceInUseException{Message: aws.String("Cannot create preexisting table")}
	}
	if len(in.LocalSecondaryIndexes) > 0 {
		return nil, unsupported("local secondary indexes")
	}
	t := &table{name: name, created: db.now(), items: map[string]item{}, stream: in.StreamSpecification}
	defs := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		defs[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	for _, k := range in.KeySchema {
		n := aws.ToString(k.AttributeName)
		typ, ok := defs[n]
		if !ok {
			return nil, validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: %v", n, keysOf(defs))
		}
		switch typ {
		case types.ScalarAttributeTypeS, types.ScalarAttributeTypeN, types.ScalarAttributeTypeB:
		default:
			return nil, validation("One or more parameter values were invalid: invalid attribute type %q for %s", typ, n)
		}
		switch {
		case k.KeyType == types.KeyTypeHash && t.hashKey == "":
			t.hashKey, t.hashType = n, typ
		case k.KeyType == types.KeyTypeRange && t.rangeKey == "" && t.hashKey != "":
			t.rangeKey, t.rangeType = n, typ
		default:
			return nil, validation("Invalid KeySchema: the first element must be the HASH key, the optional second the RANGE key")
		}
	}
	if t.hashKey == "" {
		return nil, validation("Invalid KeySchema: no HASH key")
	}
	used := map[string]bool{t.hashKey: true, t.rangeKey: true}
	for _, g := range in.GlobalSecondaryIndexes {
		x, err := indexKeys(g, defs)
		if err != nil {
			return nil, err
		}
		for _, y := range t.indexes {
			if y.name == x.name {
				return nil, validation("One or more parameter values were invalid: Duplicate index name: %s", x.name)
			}
		}
		t.indexes = append(t.indexes, x)
		used[x.hashKey], used[x.rangeKey] = true, true
	}
	delete(used, "")
	if len(defs) != len(used) {
		return nil, validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	db.tables[name] = t
	return &dynamodb.CreateTableOutput{TableDescription: t.describe()}, nil
}

// DeleteTable drops a table and its items.
func (db *DB) DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error) {
	t, unlock, err := db.enterTable(ctx, "DeleteTable", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	delete(db.tables, t.name)
	d := t.describe()
	d.TableStatus = types.TableStatusDeleting
	return &dynamodb.DeleteTableOutput{TableDescription: d}, nil
}

// DescribeTable describes a table: its key schema and attribute definitions.
func (db *DB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	t, unlock, err := db.enterTable(ctx, "DescribeTable", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &dynamodb.DescribeTableOutput{Table: t.describe()}, nil
}

func (t *table) describe() *types.TableDescription {
	d := &types.TableDescription{
		TableName:        aws.String(t.name),
		TableArn:         aws.String("arn:aws:dynamodb:memory:000000000000:table/" + t.name),
		TableStatus:      types.TableStatusActive,
		CreationDateTime: aws.Time(t.created),
		ItemCount:        aws.Int64(int64(len(t.items))),
		KeySchema:        []types.KeySchemaElement{{AttributeName: aws.String(t.hashKey), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(t.hashKey), AttributeType: t.hashType},
		},
		BillingModeSummary: &types.BillingModeSummary{BillingMode: types.BillingModePayPerRequest},
	}
	if t.rangeKey != "" {
		d.KeySchema = append(d.KeySchema, types.KeySchemaElement{AttributeName: aws.String(t.rangeKey), KeyType: types.KeyTypeRange})
		d.AttributeDefinitions = append(d.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(t.rangeKey), AttributeType: t.rangeType})
	}
	defined := map[string]bool{t.hashKey: true, t.rangeKey: true}
	for _, x := range t.indexes {
		g := types.GlobalSecondaryIndexDescription{
			IndexName:   aws.String(x.name),
			IndexStatus: types.IndexStatusActive,
			KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String(x.hashKey), KeyType: types.KeyTypeHash}},
			Projection:  &types.Projection{ProjectionType: types.ProjectionTypeAll},
			IndexArn:    aws.String(*d.TableArn + "/index/" + x.name),
		}
		if x.keysOnly {
			g.Projection.ProjectionType = types.ProjectionTypeKeysOnly
		}
		if x.rangeKey != "" {
			g.KeySchema = append(g.KeySchema, types.KeySchemaElement{AttributeName: aws.String(x.rangeKey), KeyType: types.KeyTypeRange})
		}
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, g)
		for _, k := range []struct {
			n string
			t types.ScalarAttributeType
		}{{x.hashKey, x.hashType}, {x.rangeKey, x.rangeType}} {
			if k.n != "" && !defined[k.n] {
				defined[k.n] = true
				d.AttributeDefinitions = append(d.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(k.n), AttributeType: k.t})
			}
		}
	}
	if t.stream != nil && aws.ToBool(t.stream.StreamEnabled) {
		d.StreamSpecification = t.stream
		d.LatestStreamArn = aws.String(*d.TableArn + "/stream/" + t.created.UTC().Format("2006-01-02T15:04:05.000"))
	}
	return d
}

// UpdateTimeToLive enables or disables TTL. Items are swept only by SweepExpired.
func (db *DB) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	t, unlock, err := db.enterTable(ctx, "UpdateTimeToLive", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	spec := in.TimeToLiveSpecification
	if spec == nil || aws.ToString(spec.AttributeName) == "" || spec.Enabled == nil {
		return nil, validation("TimeToLiveSpecification needs AttributeName and Enabled")
	}
	attr, on := aws.ToString(spec.AttributeName), aws.ToBool(spec.Enabled)
	switch {
	case on && t.ttlOn:
		return nil, validation("TimeToLive is already enabled")
	case !on && !t.ttlOn:
		return nil, validation("TimeToLive is already disabled")
	case !on && attr != t.ttlAttr:
		return nil, validation("TimeToLive is active on a different AttributeName: current AttributeName is %s", t.ttlAttr)
	}
	t.ttlOn, t.ttlAttr = on, attr
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: &types.TimeToLiveSpecification{
		AttributeName: aws.String(attr), Enabled: aws.Bool(on),
	}}, nil
}

// DescribeTimeToLive reports the TTL setting.
func (db *DB) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	t, unlock, err := db.enterTable(ctx, "DescribeTimeToLive", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if t.ttlOn {
		d.TimeToLiveStatus = types.TimeToLiveStatusEnabled
		d.AttributeName = aws.String(t.ttlAttr)
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}

// keyOf validates a key (exactly the key attributes, of the right types) and
// returns its canonical encoding.
func (t *table) keyOf(key item) (string, error) {
	n := 1
	if t.rangeKey != "" {
		n = 2
	}
	if len(key) != n {
		return "", validation("The provided key element does not match the schema")
	}
	return t.keyFrom(key)
}

// keyFrom reads the key attributes of an item or key.
// startKey reads a page's ExclusiveStartKey as the table's key (Query and
// Scan).
func (t *table) startKey(k map[string]types.AttributeValue) (string, error) {
	start, err := cleanItem(k)
	if err != nil {
		return "", err
	}
	sk, err := t.keyFrom(start)
	if err != nil {
		return "", validation("The provided starting key is invalid: %s", errMessage(err))
	}
	return sk, nil
}

func (t *table) keyFrom(it item) (string, error) {
	var b strings.Builder
	for _, k := range []struct {
		name string
		typ  types.ScalarAttributeType
	}{{t.hashKey, t.hashType}, {t.rangeKey, t.rangeType}} {
		if k.name == "" {
			continue
		}
		v, ok := it[k.name]
		if !ok {
			return "", validation("One or more parameter values were invalid: Missing the key %s in the item", k.name)
		}
		if typeName(v) != string(k.typ) {
			return "", validation("One or more parameter values were invalid: Type mismatch for key %s expected: %s actual: %s", k.name, k.typ, typeName(v))
		}
		size := 0
		switch x := v.(type) {
		case *types.AttributeValueMemberS:
			if x.Value == "" {
				return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", k.name)
			}
			size = len(x.Value)
		case *types.AttributeValueMemberB:
			if len(x.Value) == 0 {
				return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: %s", k.name)
			}
			size = len(x.Value)
		}
		if k.name == t.rangeKey && size > ddblimit.SortKeyBytes {
			return "", validation("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", ddblimit.SortKeyBytes)
		}
		if k.name == t.hashKey && size > ddblimit.PartitionKeyBytes {
			return "", validation("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of %d bytes", ddblimit.PartitionKeyBytes)
		}
		encodeValue(&b, v)
	}
	return b.String(), nil
}

func (t *table) isKey(name string) bool {
	return name == t.hashKey || (t.rangeKey != "" && name == t.rangeKey)
}

// Swept is an item SweepExpired deleted.
type Swept struct {
	Table     string
	Item      map[string]types.AttributeValue
	ExpiresAt time.Time
}

// SweepExpired does what DynamoDB's TTL does at some time after an item
// expires: it deletes, in every table whose TTL is enabled, the items whose
// TTL attribute is a number of epoch seconds before now (and not more than
// five years before it: DynamoDB leaves those alone) and for which isDue says
// their time has come (DynamoDB sweeps within days of expiry, at no time it
// promises: the caller draws it). Items whose attribute is missing or not a
// number are never swept. It returns the items deleted, in an order
// fixed by their tables and keys.
// The deletes are not counted as calls or write units (DynamoDB's own
// deletes are free), and nothing else changes.
func (db *DB) SweepExpired(now time.Time, isDue func(table string, key map[string]types.AttributeValue, expiresAt time.Time) bool) []Swept {
	db.mu.Lock()
	defer db.mu.Unlock()
	var out []Swept
	for _, name := range slices.Sorted(maps.Keys(db.tables)) {
		t := db.tables[name]
		if !t.ttlOn {
			continue
		}
		var due []string // found in map order, swept in key order
		for k, it := range t.items {
			n, ok := it[t.ttlAttr].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				continue
			}
			exp := time.Unix(int64(f), 0)
			if !exp.Before(now) || exp.Before(now.AddDate(-5, 0, 0)) {
				continue
			}
			key := map[string]types.AttributeValue{t.hashKey: it[t.hashKey]}
			if t.rangeKey != "" {
				key[t.rangeKey] = it[t.rangeKey]
			}
			if !isDue(t.name, key, exp) {
				continue
			}
			due = append(due, k)
		}
		slices.Sort(due)
		for _, k := range due {
			it := t.items[k]
			n, _ := strconv.ParseFloat(it[t.ttlAttr].(*types.AttributeValueMemberN).Value, 64)
			delete(t.items, k)
			out = append(out, Swept{Table: t.name, Item: copyItem(it), ExpiresAt: time.Unix(int64(n), 0)})
		}
	}
	return out
}
