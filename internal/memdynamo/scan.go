package memdynamo

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// Scan reads the table's items in key order (DynamoDB's order is a hash's;
// any fixed order will do): FilterExpression, ProjectionExpression, Limit
// (items read, before the filter, as DynamoDB counts), ExclusiveStartKey
// and ConsistentRead. Indexes, Select, segments and the legacy parameters
// fail with ErrUnsupported. A page ends at Limit items read or after 1 MB.
func (db *DB) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	t, unlock, err := db.enterTable(ctx, "Scan", in.TableName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if in.IndexName != nil || in.Select != "" || in.Segment != nil || in.TotalSegments != nil || len(in.ScanFilter) > 0 || len(in.AttributesToGet) > 0 {
		return nil, unsupported("IndexName, Select, segments and legacy Scan parameters")
	}
	if in.Limit != nil && *in.Limit < 1 {
		return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	req, err := prepare(in.ExpressionAttributeNames, in.ExpressionAttributeValues,
		exprSpec{kindCondition, in.FilterExpression}, exprSpec{kindProjection, in.ProjectionExpression})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(t.items))
	for k := range t.items {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(in.ExclusiveStartKey) > 0 {
		sk, err := t.startKey(in.ExclusiveStartKey)
		if err != nil {
			return nil, err
		}
		i := sort.SearchStrings(keys, sk)
		if i < len(keys) && keys[i] == sk {
			i++
		}
		keys = keys[i:]
	}
	out := &dynamodb.ScanOutput{}
	cut, read := len(keys), 0
	if in.Limit != nil && int(*in.Limit) < cut {
		cut = int(*in.Limit)
	}
	for i, k := range keys[:cut] {
		if read += itemSize(t.items[k]); read >= ddblimit.QueryPageBytes {
			cut = i + 1
			break
		}
	}
	if cut < len(keys) {
		last := t.items[keys[cut-1]]
		lek := item{}
		for _, k := range []string{t.hashKey, t.rangeKey} {
			if k != "" {
				lek[k] = copyValue(last[k])
			}
		}
		out.LastEvaluatedKey = lek
	}
	for _, k := range keys[:cut] {
		it := t.items[k]
		if req.cond != nil && !req.evalCond(it, req.cond) {
			continue
		}
		out.Items = append(out.Items, db.project(t, nil, req, it))
	}
	out.Count = int32(len(out.Items))
	out.ScannedCount = int32(cut)
	return out, nil
}
