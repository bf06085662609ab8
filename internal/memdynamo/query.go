package memdynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// index is a global secondary index: a view of the table's items that have
// both its key attributes (of the declared types), ordered by its range key.
// Projection ALL and KEYS_ONLY are modelled. Unlike DynamoDB, which updates
// an index asynchronously, a query sees every committed write at once; code
// that must not depend on an index being current cannot tell the
// difference, and no code here may rely on it being current.
type index struct {
	name      string
	hashKey   string
	hashType  types.ScalarAttributeType
	rangeKey  string
	rangeType types.ScalarAttributeType
	keysOnly  bool
}

// indexKeys validates a GlobalSecondaryIndex of CreateTable.
func indexKeys(g types.GlobalSecondaryIndex, defs map[string]types.ScalarAttributeType) (*index, error) {
	x := &index{name: aws.ToString(g.IndexName)}
	if len(x.name) < 3 || len(x.name) > 255 {
		return nil, validation("Invalid index name %q: at least 3 and at most 255 characters", x.name)
	}
	for _, k := range g.KeySchema {
		n := aws.ToString(k.AttributeName)
		typ, ok := defs[n]
		if !ok {
			return nil, validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: %v", n, keysOf(defs))
		}
		switch {
		case k.KeyType == types.KeyTypeHash && x.hashKey == "":
			x.hashKey, x.hashType = n, typ
		case k.KeyType == types.KeyTypeRange && x.rangeKey == "" && x.hashKey != "":
			x.rangeKey, x.rangeType = n, typ
		default:
			return nil, validation("Invalid KeySchema of index %s", x.name)
		}
	}
	if x.hashKey == "" {
		return nil, validation("Invalid KeySchema of index %s: no HASH key", x.name)
	}
	if g.Projection == nil {
		return nil, validation("One or more parameter values were invalid: Projection of index %s is missing", x.name)
	}
	switch g.Projection.ProjectionType {
	case types.ProjectionTypeAll:
	case types.ProjectionTypeKeysOnly:
		x.keysOnly = true
	default:
		return nil, unsupported("index projection %s", g.Projection.ProjectionType)
	}
	return x, nil
}

// checkIndexKeys rejects an item whose index key attributes have the wrong
// type or are empty, as DynamoDB does at write time.
func (t *table) checkIndexKeys(it item) error {
	for _, x := range t.indexes {
		for _, k := range []struct {
			name string
			typ  types.ScalarAttributeType
		}{{x.hashKey, x.hashType}, {x.rangeKey, x.rangeType}} {
			if k.name == "" {
				continue
			}
			v, ok := it[k.name]
			if !ok {
				continue
			}
			if typeName(v) != string(k.typ) {
				return validation("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: %s Actual: %s IndexName: %s", k.name, k.typ, typeName(v), x.name)
			}
			if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == "" {
				return validation("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", x.name, k.name)
			}
		}
	}
	return nil
}

// Query reads the items of one partition of the table or of a global
// secondary index, ordered by the range key: KeyConditionExpression (hash
// key equality, optionally AND one range key condition: =, <, <=, >, >=,
// BETWEEN, begins_with), ProjectionExpression (top-level names), Limit,
// ScanIndexForward, ExclusiveStartKey and ConsistentRead (refused on an
// index, as DynamoDB does). FilterExpression, Select and the legacy
// parameters fail with ErrUnsupported. A page ends at Limit items or
// after 1 MB read, as DynamoDB's do.
func (db *DB) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	t, unlock, err := db.enterTable(ctx, "Query", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if in.FilterExpression != nil || in.Select != "" || len(in.KeyConditions) > 0 || len(in.QueryFilter) > 0 || len(in.AttributesToGet) > 0 {
		return nil, unsupported("FilterExpression, Select and legacy Query parameters")
	}
	if in.KeyConditionExpression == nil {
		return nil, validation("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	if in.Limit != nil && *in.Limit < 1 {
		return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	hashKey, rangeKey := t.hashKey, t.rangeKey
	var x *index
	if n := aws.ToString(in.IndexName); n != "" {
		for _, c := range t.indexes {
			if c.name == n {
				x = c
			}
		}
		if x == nil {
			return nil, validation("The table does not have the specified index: %s", n)
		}
		if aws.ToBool(in.ConsistentRead) {
			return nil, validation("Consistent reads are not supported on global secondary indexes")
		}
		hashKey, rangeKey = x.hashKey, x.rangeKey
	}
	req, err := prepare(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
		exprSpec{kindKeyCondition, in.KeyConditionExpression}, exprSpec{kindProjection, in.ProjectionExpression})
	if err != nil {
		return nil, err
	}
	if err := req.checkKeyCondition(req.cond, hashKey, rangeKey); err != nil {
		return nil, err
	}
	var rows []item
	for _, it := range t.items {
		if x != nil {
			if _, ok := it[x.hashKey]; !ok {
				continue
			}
			if _, ok := it[x.rangeKey]; x.rangeKey != "" && !ok {
				continue
			}
		}
		if req.evalCond(it, req.cond) {
			rows = append(rows, it)
		}
	}
	// Range key order; items of an index with equal keys in table key order.
	tableKey := func(it item) string { k, _ := t.keyFrom(it); return k }
	sort.Slice(rows, func(i, j int) bool {
		if rangeKey != "" {
			if c, _ := compareOrdered(rows[i][rangeKey], rows[j][rangeKey]); c != 0 {
				return c < 0
			}
		}
		return tableKey(rows[i]) < tableKey(rows[j])
	})
	if in.ScanIndexForward != nil && !*in.ScanIndexForward {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	if len(in.ExclusiveStartKey) > 0 {
		sk, err := t.startKey(in.ExclusiveStartKey)
		if err != nil {
			return nil, err
		}
		for i, it := range rows {
			if tableKey(it) == sk {
				rows = rows[i+1:]
				break
			}
		}
	}
	out := &dynamodb.QueryOutput{}
	// A page ends at Limit items, or once it has read 1 MB (the item that
	// passes it included).
	cut, read := len(rows), 0
	if in.Limit != nil && int(*in.Limit) < cut {
		cut = int(*in.Limit)
	}
	for i, it := range rows[:cut] {
		if x != nil && x.keysOnly {
			it = db.project(t, x, &request{}, it)
		}
		if read += itemSize(it); read >= ddblimit.QueryPageBytes {
			cut = i + 1
			break
		}
	}
	if cut < len(rows) {
		rows = rows[:cut]
		last := rows[len(rows)-1]
		lek := item{}
		for _, k := range []string{t.hashKey, t.rangeKey, hashKey, rangeKey} {
			if k != "" {
				lek[k] = copyValue(last[k])
			}
		}
		out.LastEvaluatedKey = lek
	}
	for _, it := range rows {
		out.Items = append(out.Items, db.project(t, x, req, it))
	}
	out.Count = int32(len(out.Items))
	out.ScannedCount = out.Count
	return out, nil
}

// project copies an item as a read returns it: the index's projection (x,
// when reading an index), then the projection expression.
func (db *DB) project(t *table, x *index, req *request, it item) item {
	src := it
	if x != nil && x.keysOnly {
		src = item{}
		for _, k := range []string{t.hashKey, t.rangeKey, x.hashKey, x.rangeKey} {
			if v, ok := it[k]; ok && k != "" {
				src[k] = v
			}
		}
	}
	if req.proj == nil {
		return copyItem(src)
	}
	out := item{}
	for _, p := range req.proj {
		n := req.name(p[0])
		if v, ok := src[n]; ok {
			out[n] = copyValue(v)
		}
	}
	return out
}

// checkKeyCondition accepts what DynamoDB accepts as a key condition: the
// hash key's equality, optionally AND one condition on the range key.
func (r *request) checkKeyCondition(c *cond, hashKey, rangeKey string) error {
	var parts []*cond
	var flatten func(c *cond) error
	flatten = func(c *cond) error {
		switch c.kind {
		case cAnd:
			if err := flatten(c.left); err != nil {
				return err
			}
			return flatten(c.right)
		case cOr, cNot, cIn:
			return validation("Invalid operator used in KeyConditionExpression: %s", map[condKind]string{cOr: "OR", cNot: "NOT", cIn: "IN"}[c.kind])
		}
		parts = append(parts, c)
		return nil
	}
	if err := flatten(c); err != nil {
		return err
	}
	hash, rng := false, false
	for _, p := range parts {
		if len(p.args) == 0 || p.args[0].kind != oPath || len(p.args[0].path) != 1 {
			return validation("Query condition missed key schema element")
		}
		for _, a := range p.args[1:] {
			if a.kind != oValue {
				return validation("Invalid KeyConditionExpression: a key condition compares a key with values")
			}
		}
		name := r.name(p.args[0].path[0])
		switch {
		case name == hashKey && p.kind == cCompare && p.op == "=" && !hash:
			hash = true
		case name == hashKey:
			return validation("Query key condition not supported")
		case name == rangeKey && !rng && (p.kind == cCompare && p.op != "<>" || p.kind == cBetween || p.kind == cFunc && p.op == "begins_with"):
			rng = true
		case name == rangeKey:
			return validation("Query key condition not supported")
		default:
			return validation("Query condition missed key schema element: %s", hashKey)
		}
	}
	if !hash {
		return validation("Query condition missed key schema element: %s", hashKey)
	}
	return nil
}

// BatchGetItem reads up to 100 items by key, from one or more tables:
// Keys, ConsistentRead, ProjectionExpression (top-level names) and
// ExpressionAttributeNames. It leaves unprocessed the keys past 16 MB of
// answer, as DynamoDB does (DynamoDB may leave others too, when
// throttled: callers must handle UnprocessedKeys). AttributesToGet fails
// with ErrUnsupported.
func (db *DB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	unlock, err := db.enter(ctx, "BatchGetItem")
	if err != nil {
		return nil, err
	}
	defer unlock()
	total := 0
	for _, ka := range in.RequestItems {
		total += len(ka.Keys)
	}
	if len(in.RequestItems) == 0 || total == 0 {
		return nil, validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	if total > ddblimit.BatchGetKeys {
		return nil, validation("Too many items requested for the BatchGetItem call")
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	// The answer holds at most 16 MB: the keys past it are left
	// unprocessed, with their table's other parameters.
	left := ddblimit.BatchGetBytes
	for _, name := range sortedKeys(in.RequestItems) {
		ka := in.RequestItems[name]
		if len(ka.AttributesToGet) > 0 {
			return nil, unsupported("legacy AttributesToGet parameter")
		}
		t, err := db.table(aws.String(name))
		if err != nil {
			return nil, err
		}
		req, err := prepare(ka.ExpressionAttributeNames, nil, exprSpec{kindProjection, ka.ProjectionExpression})
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		rows := []map[string]types.AttributeValue{}
		for _, key := range ka.Keys {
			keyIt, err := cleanItem(key)
			if err != nil {
				return nil, err
			}
			k, err := t.keyOf(keyIt)
			if err != nil {
				return nil, err
			}
			if seen[k] {
				return nil, validation("Provided list of item keys contains duplicates")
			}
			seen[k] = true
			it, ok := t.items[k]
			if !ok {
				continue
			}
			row := db.project(t, nil, req, it)
			if left -= itemSize(row); left < 0 {
				un := out.UnprocessedKeys[name]
				if un.Keys == nil {
					un = ka
					un.Keys = nil
				}
				un.Keys = append(un.Keys, key)
				if out.UnprocessedKeys == nil {
					out.UnprocessedKeys = map[string]types.KeysAndAttributes{}
				}
				out.UnprocessedKeys[name] = un
				continue
			}
			rows = append(rows, row)
		}
		out.Responses[name] = rows
	}
	return out, nil
}

// sortedKeys returns m's keys in order: the same request is answered the
// same way.
func sortedKeys[V any](m map[string]V) []string {
	ks := keysOf(m)
	sort.Strings(ks)
	return ks
}
