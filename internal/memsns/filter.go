package memsns

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// filterPolicy is a subscription's FilterPolicy on message attributes: every
// key must match one of its conditions.
type filterPolicy struct {
	keys map[string][]condition
}

type condKind int

const (
	condString condKind = iota
	condNumber
	condPrefix
	condAnythingBut
	condExists
)

type condition struct {
	kind   condKind
	str    string
	num    float64
	but    []string
	exists bool
}

// parseFilterPolicy reads the subset of SNS's filter policy syntax memsns
// implements; anything else is refused, naming it.
func parseFilterPolicy(raw string) (*filterPolicy, error) {
	var doc map[string][]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, invalidParam("Filter policy: memsns takes an object of attribute names to arrays of conditions: %v", err)
	}
	if len(doc) == 0 {
		return nil, invalidParam("Filter policy: empty")
	}
	f := &filterPolicy{keys: map[string][]condition{}}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if len(doc[k]) == 0 {
			return nil, invalidParam("Filter policy: %s has no condition", k)
		}
		for _, c := range doc[k] {
			cond, err := parseCondition(k, c)
			if err != nil {
				return nil, err
			}
			f.keys[k] = append(f.keys[k], cond)
		}
	}
	return f, nil
}

func parseCondition(key string, c json.RawMessage) (condition, error) {
	c = bytes.TrimSpace(c)
	var s string
	if json.Unmarshal(c, &s) == nil {
		return condition{kind: condString, str: s}, nil
	}
	var n float64
	if json.Unmarshal(c, &n) == nil {
		return condition{kind: condNumber, num: n}, nil
	}
	var op map[string]json.RawMessage
	if json.Unmarshal(c, &op) != nil || len(op) != 1 {
		return condition{}, invalidParam("Filter policy: %s: memsns implements strings, numbers, prefix, anything-but (strings) and exists", key)
	}
	for name, v := range op {
		switch name {
		case "prefix":
			if json.Unmarshal(v, &s) == nil && s != "" {
				return condition{kind: condPrefix, str: s}, nil
			}
		case "exists":
			var b bool
			if json.Unmarshal(v, &b) == nil {
				return condition{kind: condExists, exists: b}, nil
			}
		case "anything-but":
			if json.Unmarshal(v, &s) == nil {
				return condition{kind: condAnythingBut, but: []string{s}}, nil
			}
			var ss []string
			if json.Unmarshal(v, &ss) == nil && len(ss) > 0 {
				return condition{kind: condAnythingBut, but: ss}, nil
			}
		}
		return condition{}, invalidParam("Filter policy: %s: operator %s with %s is not implemented by memsns", key, name, v)
	}
	return condition{}, nil
}

func (f *filterPolicy) match(attrs map[string]types.MessageAttributeValue) bool {
	for k, conds := range f.keys {
		v, ok := attrs[k]
		if !anyMatch(conds, v, ok) {
			return false
		}
	}
	return true
}

func anyMatch(conds []condition, v types.MessageAttributeValue, present bool) bool {
	val := aws.ToString(v.StringValue)
	isNum := strings.HasPrefix(aws.ToString(v.DataType), "Number")
	for _, c := range conds {
		switch c.kind {
		case condExists:
			if c.exists == present {
				return true
			}
		case condString:
			if present && !isNum && val == c.str {
				return true
			}
		case condNumber:
			if n, err := strconv.ParseFloat(val, 64); present && isNum && err == nil && n == c.num {
				return true
			}
		case condPrefix:
			if present && !isNum && strings.HasPrefix(val, c.str) {
				return true
			}
		case condAnythingBut:
			if present && !contains(c.but, val) {
				return true
			}
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
