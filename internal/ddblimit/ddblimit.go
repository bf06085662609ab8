// Package ddblimit holds DynamoDB's documented request and item limits and
// its way of counting an item's size, so that the library checks a commit
// against the same numbers the in-memory DynamoDB (internal/memdynamo)
// enforces. Sources: the DynamoDB Developer Guide, "Quotas in Amazon
// DynamoDB" (ServiceQuotas.html) and "DynamoDB item sizes and formats"
// (CapacityUnitCalculations.html); the API Reference of each operation.
package ddblimit

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// ItemBytes is the largest item, attribute names included.
	ItemBytes = 400 * 1024
	// TransactItems is how many actions one TransactWriteItems holds.
	TransactItems = 100
	// TransactBytes is the aggregate size of a transaction's items.
	TransactBytes = 4 * 1024 * 1024
	// BatchGetKeys is how many keys one BatchGetItem asks for.
	BatchGetKeys = 100
	// BatchGetBytes is the most one BatchGetItem returns; keys past it
	// come back in UnprocessedKeys.
	BatchGetBytes = 16 * 1024 * 1024
	// BatchWriteItems is how many puts and deletes one BatchWriteItem holds.
	BatchWriteItems = 25
	// QueryPageBytes is the most one Query page reads; past it the page
	// ends with a LastEvaluatedKey.
	QueryPageBytes = 1024 * 1024
	// PartitionKeyBytes and SortKeyBytes bound a key attribute's value.
	PartitionKeyBytes = 2048
	SortKeyBytes      = 1024
	// ExpressionBytes bounds one expression (condition, update, key
	// condition, projection, filter).
	ExpressionBytes = 4096
	// PlaceholderBytes bounds one expression attribute name or value
	// placeholder ("#name", ":val"), and SubstitutionBytes the sum of a
	// request's ExpressionAttributeNames and ExpressionAttributeValues.
	PlaceholderBytes  = 255
	SubstitutionBytes = 2 * 1024 * 1024
	// ClientRequestTokenLength bounds a TransactWriteItems idempotency token.
	ClientRequestTokenLength = 36
)

// ItemSize is an item's size as DynamoDB counts it: for each attribute the
// UTF-8 bytes of its name plus the size of its value (ValueSize).
func ItemSize(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + ValueSize(v)
	}
	return n
}

// ValueSize is a value's size as DynamoDB counts it: a string's UTF-8
// bytes, a binary's raw bytes, a number 1 byte per two significant digits
// plus 1, a boolean or null 1, a set the sum of its elements, a list or
// map 3 bytes plus 1 per element and the elements (with a map's names).
func ValueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	}
	return 0
}

// NumberSize is a number's size: 1 byte per two significant digits
// (leading and trailing zeros trimmed), plus 1.
func NumberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.TrimRight(strings.TrimLeft(s, "0"), "0")
	return (max(len(s), 1)+1)/2 + 1
}

// TransactionBytes is a lower bound of a TransactWriteItems' aggregate
// size: its puts' items and the keys of its other actions. (An update's
// size depends on the item it finds, which only DynamoDB knows.)
func TransactionBytes(items []types.TransactWriteItem) int {
	n := 0
	for _, ti := range items {
		n += ActionBytes(ti)
	}
	return n
}

// ActionBytes is ItemBytes of a put's item, or of another action's key.
func ActionBytes(ti types.TransactWriteItem) int {
	switch {
	case ti.Put != nil:
		return ItemSize(ti.Put.Item)
	case ti.Update != nil:
		return ItemSize(ti.Update.Key)
	case ti.Delete != nil:
		return ItemSize(ti.Delete.Key)
	case ti.ConditionCheck != nil:
		return ItemSize(ti.ConditionCheck.Key)
	}
	return 0
}

// Over names the first of a TransactWriteItems' limits that Check finds
// passed.
type Over int

// The limits Check knows.
const (
	Within  Over = iota // none passed
	Actions             // more than TransactItems actions
	Item                // a put's item over ItemBytes
	Bytes               // over TransactBytes in all (TransactionBytes)
)

// Check checks a TransactWriteItems' items against DynamoDB's limits by
// what can be counted before the request: the actions, each put's item,
// then the lower bound of the whole (TransactionBytes). It returns the
// limit passed, the index of the put over ItemBytes (Item), and the count
// that passes it (actions, the put's bytes or the whole's).
func Check(items []types.TransactWriteItem) (over Over, index, n int) {
	if n := len(items); n > TransactItems {
		return Actions, 0, n
	}
	total := 0
	for i, ti := range items {
		size := ActionBytes(ti)
		if ti.Put != nil && size > ItemBytes {
			return Item, i, size
		}
		total += size
	}
	if total > TransactBytes {
		return Bytes, 0, total
	}
	return Within, 0, total
}
