package memdynamo

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// item is a stored item. Stored values are always canonical deep copies,
// never shared with callers.
type item = map[string]types.AttributeValue

// maxItemBytes is DynamoDB's item size limit (400 KB).
const maxItemBytes = ddblimit.ItemBytes

// cleanItem validates an item (or a map of expression values) and returns a
// canonical deep copy.
func cleanItem(in map[string]types.AttributeValue) (item, error) {
	out := make(item, len(in))
	for k, v := range in {
		c, err := cleanValue(v, k)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

// cleanValue validates one value as DynamoDB does and returns a canonical
// deep copy (numbers in DynamoDB's form).
func cleanValue(v types.AttributeValue, key string) (types.AttributeValue, error) {
	switch x := v.(type) {
	case nil:
		return nil, validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	case *types.AttributeValueMemberS:
		if !utf8.ValidString(x.Value) {
			return nil, unsupported("string value of %q is not valid UTF-8 (the SDK would alter it in transit)", key)
		}
		return &types.AttributeValueMemberS{Value: x.Value}, nil
	case *types.AttributeValueMemberN:
		n, err := canonicalNumber(x.Value)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: n}, nil
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: bytes.Clone(x.Value)}, nil
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}, nil
	case *types.AttributeValueMemberNULL:
		if !x.Value {
			return nil, validation("One or more parameter values were invalid: Null attribute value types must have the value of true")
		}
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case *types.AttributeValueMemberSS:
		if len(x.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An string set  may not be empty")
		}
		seen := make(map[string]bool, len(x.Value))
		for _, s := range x.Value {
			if !utf8.ValidString(s) {
				return nil, unsupported("string set %q holds a value that is not valid UTF-8", key)
			}
			if seen[s] {
				return nil, validation("One or more parameter values were invalid: Input collection %v contains duplicates for key %s", x.Value, key)
			}
			seen[s] = true
		}
		return &types.AttributeValueMemberSS{Value: append([]string(nil), x.Value...)}, nil
	case *types.AttributeValueMemberNS:
		if len(x.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An number set  may not be empty")
		}
		out := make([]string, 0, len(x.Value))
		seen := make(map[string]bool, len(x.Value))
		for _, s := range x.Value {
			n, err := canonicalNumber(s)
			if err != nil {
				return nil, err
			}
			if seen[n] {
				return nil, validation("One or more parameter values were invalid: Input collection %v contains duplicates for key %s", x.Value, key)
			}
			seen[n] = true
			out = append(out, n)
		}
		return &types.AttributeValueMemberNS{Value: out}, nil
	case *types.AttributeValueMemberBS:
		if len(x.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An binary set  may not be empty")
		}
		out := make([][]byte, 0, len(x.Value))
		seen := make(map[string]bool, len(x.Value))
		for _, b := range x.Value {
			if seen[string(b)] {
				return nil, validation("One or more parameter values were invalid: Input collection contains duplicates for key %s", key)
			}
			seen[string(b)] = true
			out = append(out, bytes.Clone(b))
		}
		return &types.AttributeValueMemberBS{Value: out}, nil
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, 0, len(x.Value))
		for _, e := range x.Value {
			c, err := cleanValue(e, key)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case *types.AttributeValueMemberM:
		m, err := cleanItem(x.Value)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, unsupported("attribute value of type %T", v)
}

// copyItem deep-copies a stored (already canonical) item for a caller.
func copyItem(in item) item {
	if in == nil {
		return nil
	}
	out := make(item, len(in))
	for k, v := range in {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v types.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: x.Value}
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: x.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: bytes.Clone(x.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: x.Value}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: append([]string(nil), x.Value...)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: append([]string(nil), x.Value...)}
	case *types.AttributeValueMemberBS:
		out := make([][]byte, len(x.Value))
		for i, b := range x.Value {
			out[i] = bytes.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: out}
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			out[i] = copyValue(e)
		}
		return &types.AttributeValueMemberL{Value: out}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: copyItem(x.Value)}
	}
	return v
}

// typeName is DynamoDB's name of a value's type.
func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	}
	return "?"
}

// equalValues is DynamoDB's = on two canonical values.
func equalValues(a, b types.AttributeValue) bool {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		return ok && compareNumbers(x.Value, y.Value) == 0
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(x.Value, y.Value)
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(x.Value, y.Value)
	case *types.AttributeValueMemberNS:
		y, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(x.Value, y.Value) // canonical: equal numbers, equal strings
	case *types.AttributeValueMemberBS:
		y, ok := b.(*types.AttributeValueMemberBS)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		xs, ys := make([]string, len(x.Value)), make([]string, len(y.Value))
		for i := range x.Value {
			xs[i], ys[i] = string(x.Value[i]), string(y.Value[i])
		}
		return sameSet(xs, ys)
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		for i := range x.Value {
			if !equalValues(x.Value[i], y.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(x.Value) != len(y.Value) {
			return false
		}
		for k, v := range x.Value {
			w, ok := y.Value[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]bool, len(a))
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}

// compareOrdered orders two values of the same scalar type (S, N, B).
// ok is false when they cannot be ordered: DynamoDB then evaluates <, <=, >,
// >= and BETWEEN to false.
func compareOrdered(a, b types.AttributeValue) (c int, ok bool) {
	switch x := a.(type) {
	case *types.AttributeValueMemberS:
		if y, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(x.Value, y.Value), true // UTF-8 byte order
		}
	case *types.AttributeValueMemberN:
		if y, ok := b.(*types.AttributeValueMemberN); ok {
			return compareNumbers(x.Value, y.Value), true
		}
	case *types.AttributeValueMemberB:
		if y, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(x.Value, y.Value), true
		}
	}
	return 0, false
}

// itemSize is an item's size as DynamoDB counts it.
func itemSize(it item) int { return ddblimit.ItemSize(it) }

// encodeValue writes an unambiguous canonical encoding of v: used for item
// keys in the table and to fingerprint transaction requests.
func encodeValue(b *strings.Builder, v types.AttributeValue) {
	str := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	b.WriteString(typeName(v))
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		str(x.Value)
	case *types.AttributeValueMemberN:
		str(x.Value)
	case *types.AttributeValueMemberB:
		str(string(x.Value))
	case *types.AttributeValueMemberBOOL:
		str(strconv.FormatBool(x.Value))
	case *types.AttributeValueMemberNULL:
		str("")
	case *types.AttributeValueMemberSS:
		encodeStrings(b, x.Value, str)
	case *types.AttributeValueMemberNS:
		encodeStrings(b, x.Value, str)
	case *types.AttributeValueMemberBS:
		s := make([]string, len(x.Value))
		for i, e := range x.Value {
			s[i] = string(e)
		}
		encodeStrings(b, s, str)
	case *types.AttributeValueMemberL:
		b.WriteString(strconv.Itoa(len(x.Value)))
		b.WriteByte('[')
		for _, e := range x.Value {
			encodeValue(b, e)
		}
		b.WriteByte(']')
	case *types.AttributeValueMemberM:
		encodeMap(b, x.Value)
	}
}

func encodeStrings(b *strings.Builder, s []string, str func(string)) {
	s = append([]string(nil), s...)
	sort.Strings(s)
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte('{')
	for _, e := range s {
		str(e)
	}
	b.WriteByte('}')
}

func encodeMap(b *strings.Builder, m map[string]types.AttributeValue) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString(strconv.Itoa(len(keys)))
	b.WriteByte('{')
	for _, k := range keys {
		fmt.Fprintf(b, "%d:%s", len(k), k)
		encodeValue(b, m[k])
	}
	b.WriteByte('}')
}
