package memdynamo

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// maxTransactionBytes is DynamoDB's limit on a transaction's aggregate size.
const maxTransactionBytes = ddblimit.TransactBytes

type writeKind int

const (
	wPut writeKind = iota
	wUpdate
	wDelete
	wCheck
)

// write is one validated item write (or condition check), before it is
// evaluated against the table.
type write struct {
	kind   writeKind
	t      *table
	key    string // canonical key
	keyIt  item   // key attributes (update: the base of a new item)
	put    item   // wPut: the cleaned item
	req    *request
	allOld bool // ReturnValuesOnConditionCheckFailure=ALL_OLD
}

// ok reports whether the write's condition holds for the current item.
func (w *write) ok(old item) bool {
	return w.req.cond == nil || w.req.evalCond(old, w.req.cond)
}

// result computes the item after the write; nil means deleted (or, for a
// condition check, unchanged: check with kind).
func (w *write) result(old item) (item, error) {
	switch w.kind {
	case wPut:
		if err := w.t.checkIndexKeys(w.put); err != nil {
			return nil, err
		}
		return w.put, nil
	case wDelete, wCheck:
		return nil, nil
	}
	if w.req.update == nil {
		if old != nil {
			return old, nil
		}
		return w.keyIt, nil
	}
	base := old
	if base == nil {
		base = w.keyIt
	}
	next, err := w.req.applyUpdate(base)
	if err != nil {
		return nil, err
	}
	if size := itemSize(next); size > maxItemBytes {
		return nil, validation("Item size to update has exceeded the maximum allowed size")
	}
	if err := w.t.checkIndexKeys(next); err != nil {
		return nil, err
	}
	return next, nil
}

func (w *write) apply(next item) {
	switch w.kind {
	case wPut, wUpdate:
		w.t.items[w.key] = next
	case wDelete:
		delete(w.t.items, w.key)
	}
}

func checkAllOld(v types.ReturnValuesOnConditionCheckFailure) (bool, error) {
	switch v {
	case "", types.ReturnValuesOnConditionCheckFailureNone:
		return false, nil
	case types.ReturnValuesOnConditionCheckFailureAllOld:
		return true, nil
	}
	return false, validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", v)
}

func (ts tableSet) preparePut(tableName *string, it map[string]types.AttributeValue, cond *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (*write, error) {
	t, err := ts.table(tableName)
	if err != nil {
		return nil, err
	}
	allOld, err := checkAllOld(rv)
	if err != nil {
		return nil, err
	}
	clean, err := cleanItem(it)
	if err != nil {
		return nil, err
	}
	key, err := t.keyFrom(clean)
	if err != nil {
		return nil, err
	}
	if itemSize(clean) > maxItemBytes {
		return nil, validation("Item size has exceeded the maximum allowed size")
	}
	req, err := prepare(names, values, exprSpec{kindCondition, cond})
	if err != nil {
		return nil, err
	}
	return &write{kind: wPut, t: t, key: key, put: clean, req: req, allOld: allOld}, nil
}

func (ts tableSet) prepareKeyed(kind writeKind, tableName *string, key map[string]types.AttributeValue, cond, upd *string, names map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) (*write, error) {
	t, err := ts.table(tableName)
	if err != nil {
		return nil, err
	}
	allOld, err := checkAllOld(rv)
	if err != nil {
		return nil, err
	}
	keyIt, err := cleanItem(key)
	if err != nil {
		return nil, err
	}
	k, err := t.keyOf(keyIt)
	if err != nil {
		return nil, err
	}
	specs := []exprSpec{{kindCondition, cond}}
	if kind == wUpdate {
		specs = append(specs, exprSpec{kindUpdate, upd})
	}
	req, err := prepare(names, values, specs...)
	if err != nil {
		return nil, err
	}
	if req.update != nil {
		for _, n := range req.updatedNames() {
			if t.isKey(n) {
				return nil, validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", n)
			}
		}
	}
	return &write{kind: kind, t: t, key: k, keyIt: keyIt, req: req, allOld: allOld}, nil
}

// PutItem writes an item, conditionally. ReturnValues may be NONE or ALL_OLD.
func (db *DB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	ts, err := db.begin(ctx, "PutItem")
	if err != nil {
		return nil, err
	}
	if len(in.Expected) > 0 || in.ConditionalOperator != "" {
		return nil, unsupported("legacy Expected/ConditionalOperator parameters")
	}
	switch in.ReturnValues {
	case "", types.ReturnValueNone, types.ReturnValueAllOld:
	default:
		return nil, validation("Return values set to invalid value")
	}
	w, err := ts.preparePut(in.TableName, in.Item, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	unlock, err := db.lockFor(w)
	if err != nil {
		return nil, err
	}
	defer unlock()
	old := w.t.items[w.key]
	if !w.ok(old) {
		db.units += writeUnits(old, nil)
		return nil, conditionFailed(old, w.allOld)
	}
	if err := w.t.checkIndexKeys(w.put); err != nil {
		return nil, err
	}
	db.units += writeUnits(old, w.put)
	w.apply(w.put)
	out := &dynamodb.PutItemOutput{}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = copyItem(old)
	}
	return out, nil
}

// UpdateItem updates (or creates) an item, conditionally.
func (db *DB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ts, err := db.begin(ctx, "UpdateItem")
	if err != nil {
		return nil, err
	}
	if len(in.AttributeUpdates) > 0 || len(in.Expected) > 0 || in.ConditionalOperator != "" {
		return nil, unsupported("legacy AttributeUpdates/Expected/ConditionalOperator parameters")
	}
	switch in.ReturnValues {
	case "", types.ReturnValueNone, types.ReturnValueAllOld, types.ReturnValueAllNew, types.ReturnValueUpdatedOld, types.ReturnValueUpdatedNew:
	default:
		return nil, validation("Return values set to invalid value")
	}
	w, err := ts.prepareKeyed(wUpdate, in.TableName, in.Key, in.ConditionExpression, in.UpdateExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	unlock, err := db.lockFor(w)
	if err != nil {
		return nil, err
	}
	defer unlock()
	old := w.t.items[w.key]
	if !w.ok(old) {
		db.units += writeUnits(old, nil)
		return nil, conditionFailed(old, w.allOld)
	}
	next, err := w.result(old)
	if err != nil {
		return nil, err
	}
	db.units += writeUnits(old, next)
	w.apply(next)
	out := &dynamodb.UpdateItemOutput{}
	switch in.ReturnValues {
	case types.ReturnValueAllOld:
		out.Attributes = copyItem(old)
	case types.ReturnValueAllNew:
		out.Attributes = copyItem(next)
	case types.ReturnValueUpdatedOld, types.ReturnValueUpdatedNew:
		src := old
		if in.ReturnValues == types.ReturnValueUpdatedNew {
			src = next
		}
		if w.req.update != nil {
			for _, n := range w.req.updatedNames() {
				if v, ok := src[n]; ok {
					if out.Attributes == nil {
						out.Attributes = item{}
					}
					out.Attributes[n] = copyValue(v)
				}
			}
		}
	}
	return out, nil
}

// DeleteItem deletes an item, conditionally.
func (db *DB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	ts, err := db.begin(ctx, "DeleteItem")
	if err != nil {
		return nil, err
	}
	if len(in.Expected) > 0 || in.ConditionalOperator != "" {
		return nil, unsupported("legacy Expected/ConditionalOperator parameters")
	}
	switch in.ReturnValues {
	case "", types.ReturnValueNone, types.ReturnValueAllOld:
	default:
		return nil, validation("Return values set to invalid value")
	}
	w, err := ts.prepareKeyed(wDelete, in.TableName, in.Key, in.ConditionExpression, nil, in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	unlock, err := db.lockFor(w)
	if err != nil {
		return nil, err
	}
	defer unlock()
	old := w.t.items[w.key]
	db.units += writeUnits(old, nil)
	if !w.ok(old) {
		return nil, conditionFailed(old, w.allOld)
	}
	w.apply(nil)
	out := &dynamodb.DeleteItemOutput{}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = copyItem(old)
	}
	return out, nil
}

// GetItem reads an item. Reads are always consistent. A projection may name
// top-level attributes only.
func (db *DB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	unlock, err := db.enter(ctx, "GetItem")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if len(in.AttributesToGet) > 0 {
		return nil, unsupported("legacy AttributesToGet parameter")
	}
	t, err := db.table(in.TableName)
	if err != nil {
		return nil, err
	}
	keyIt, err := cleanItem(in.Key)
	if err != nil {
		return nil, err
	}
	k, err := t.keyOf(keyIt)
	if err != nil {
		return nil, err
	}
	req, err := prepare(in.ExpressionAttributeNames, nil, exprSpec{kindProjection, in.ProjectionExpression})
	if err != nil {
		return nil, err
	}
	it, ok := t.items[k]
	if !ok {
		return &dynamodb.GetItemOutput{}, nil
	}
	return &dynamodb.GetItemOutput{Item: db.project(t, nil, req, it)}, nil
}

// TransactWriteItems applies up to 100 writes all or nothing. Every
// condition is evaluated against the state before the transaction; if any
// fails, nothing is applied and a *types.TransactionCanceledException carries
// one reason per item ("ConditionalCheckFailed", with the item when ALL_OLD
// was asked, or "None"). A ClientRequestToken seen in the last ten minutes
// with the same request returns success without applying anything again.
func (db *DB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	ts, err := db.begin(ctx, "TransactWriteItems")
	if err != nil {
		return nil, err
	}
	n := len(in.TransactItems)
	if n == 0 || n > ddblimit.TransactItems {
		return nil, validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	var fp string
	if tok := aws.ToString(in.ClientRequestToken); len(tok) > ddblimit.ClientRequestTokenLength {
		return nil, validation("1 validation error detected: Value '%s' at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to %d", tok, ddblimit.ClientRequestTokenLength)
	}
	tok := aws.ToString(in.ClientRequestToken)
	if tok != "" {
		fp = fingerprint(in.TransactItems)
	}
	writes := make([]*write, n)
	seen := map[string]bool{}
	for i, ti := range in.TransactItems {
		var w *write
		var err error
		count := 0
		if p := ti.Put; p != nil {
			count++
			w, err = ts.preparePut(p.TableName, p.Item, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues, p.ReturnValuesOnConditionCheckFailure)
		}
		if u := ti.Update; u != nil {
			count++
			if u.UpdateExpression == nil {
				return nil, validation("1 validation error detected: Value null at 'transactItems.%d.member.update.updateExpression' failed to satisfy constraint: Member must not be null", i+1)
			}
			w, err = ts.prepareKeyed(wUpdate, u.TableName, u.Key, u.ConditionExpression, u.UpdateExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues, u.ReturnValuesOnConditionCheckFailure)
		}
		if d := ti.Delete; d != nil {
			count++
			w, err = ts.prepareKeyed(wDelete, d.TableName, d.Key, d.ConditionExpression, nil, d.ExpressionAttributeNames, d.ExpressionAttributeValues, d.ReturnValuesOnConditionCheckFailure)
		}
		if c := ti.ConditionCheck; c != nil {
			count++
			if c.ConditionExpression == nil {
				return nil, validation("1 validation error detected: Value null at 'transactItems.%d.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null", i+1)
			}
			w, err = ts.prepareKeyed(wCheck, c.TableName, c.Key, c.ConditionExpression, nil, c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ReturnValuesOnConditionCheckFailure)
		}
		if count != 1 {
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err != nil {
			return nil, err
		}
		id := w.t.name + "\x00" + w.key
		if seen[id] {
			return nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		writes[i] = w
	}
	total := 0
	for _, w := range writes {
		total += len(w.key) + itemSize(w.put) + itemSize(w.req.values)
	}
	if total > maxTransactionBytes {
		return nil, validation("Transaction payload size cannot exceed 4MB. Payload Size: %d", total)
	}
	unlock, err := db.lockFor(writes...)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if tok != "" {
		db.expireTokens(db.now())
		if seen, ok := db.tokens[tok]; ok {
			if seen.fingerprint != fp {
				return nil, &types.IdempotentParameterMismatchException{Message: aws.String("The request uses the same client token as a previous, but non-identical request.")}
			}
			return &dynamodb.TransactWriteItemsOutput{}, nil
		}
	}
	reasons := make([]types.CancellationReason, n)
	nexts := make([]item, n)
	var codes []string
	failed := false
	for i, w := range writes {
		old := w.t.items[w.key]
		if !w.ok(old) {
			failed = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: aws.String("The conditional request failed")}
			if w.allOld && old != nil {
				reasons[i].Item = copyItem(old)
			}
			codes = append(codes, "ConditionalCheckFailed")
			continue
		}
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		codes = append(codes, "None")
		// DynamoDB rejects the whole request when a write cannot be applied
		// (an ADD to a string, say), even if another condition failed.
		next, err := w.result(old)
		if err != nil {
			return nil, err
		}
		nexts[i] = next
	}
	if failed {
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	for i, w := range writes {
		if w.kind != wCheck {
			db.units += 2 * writeUnits(w.t.items[w.key], nexts[i])
		}
		w.apply(nexts[i])
	}
	if fp != "" {
		db.recordToken(*in.ClientRequestToken, fp)
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// fingerprint identifies a transaction request for ClientRequestToken checks.
func fingerprint(items []types.TransactWriteItem) string {
	var b strings.Builder
	str := func(s *string) {
		if s == nil {
			b.WriteString("-;")
			return
		}
		fmt.Fprintf(&b, "%d:%s;", len(*s), *s)
	}
	names := func(m map[string]string) {
		keys := keysOf(m)
		sort.Strings(keys)
		fmt.Fprintf(&b, "%d{", len(keys))
		for _, k := range keys {
			v := m[k]
			str(&k)
			str(&v)
		}
		b.WriteString("}")
	}
	// One write: its kind, table, item or key, expressions and return values.
	write := func(kind string, table *string, itemOrKey map[string]types.AttributeValue, update, cond *string,
		exprNames map[string]string, values map[string]types.AttributeValue, rv types.ReturnValuesOnConditionCheckFailure) {
		b.WriteString(kind)
		str(table)
		encodeMap(&b, itemOrKey)
		if kind == "U" {
			str(update)
		}
		str(cond)
		names(exprNames)
		encodeMap(&b, values)
		b.WriteString(string(rv) + ";")
	}
	for _, ti := range items {
		switch {
		case ti.Put != nil:
			p := ti.Put
			write("P", p.TableName, p.Item, nil, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues, p.ReturnValuesOnConditionCheckFailure)
		case ti.Update != nil:
			u := ti.Update
			write("U", u.TableName, u.Key, u.UpdateExpression, u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues, u.ReturnValuesOnConditionCheckFailure)
		case ti.Delete != nil:
			d := ti.Delete
			write("D", d.TableName, d.Key, nil, d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues, d.ReturnValuesOnConditionCheckFailure)
		case ti.ConditionCheck != nil:
			c := ti.ConditionCheck
			write("C", c.TableName, c.Key, nil, c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ReturnValuesOnConditionCheckFailure)
		}
	}
	return b.String()
}
