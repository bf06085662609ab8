package memdynamo

import (
	"bytes"
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// maxExpressionBytes is DynamoDB's limit on the length of one expression.
const maxExpressionBytes = ddblimit.ExpressionBytes

// exprSpec is one expression of a request, nil when absent.
type exprSpec struct {
	kind exprKind
	text *string
}

// request holds the validated expressions of one item operation.
type request struct {
	names  map[string]string
	values item
	cond   *cond
	update *update
	proj   []path
}

// prepare parses and validates the expressions of one item operation the way
// DynamoDB does before it looks at any item: syntax, reserved words,
// placeholders that are undefined or unused, value types known statically.
func prepare(names map[string]string, values map[string]types.AttributeValue, specs ...exprSpec) (*request, error) {
	r := &request{names: names}
	var usedNames, usedValues []string
	present := false
	for _, s := range specs {
		if s.text == nil {
			continue
		}
		present = true
		if len(*s.text) > maxExpressionBytes {
			return nil, validation("Invalid %s: Expression size has exceeded the maximum allowed size; expression size: %d", s.kind.label(), len(*s.text))
		}
		p := parseExpr(s.kind, *s.text)
		if p.err != nil {
			return nil, p.err
		}
		usedNames = append(usedNames, p.names...)
		usedValues = append(usedValues, p.values...)
		switch s.kind {
		case kindCondition, kindKeyCondition:
			r.cond = p.cond
		case kindUpdate:
			r.update = p.update
		case kindProjection:
			r.proj = p.proj
		}
	}
	if !present {
		if len(names) > 0 {
			return nil, validation("ExpressionAttributeNames can only be specified when using expressions")
		}
		if len(values) > 0 {
			return nil, validation("ExpressionAttributeValues can only be specified when using expressions: ConditionExpression is null")
		}
		return r, nil
	}
	if names != nil && len(names) == 0 {
		return nil, validation("ExpressionAttributeNames must not be empty")
	}
	if values != nil && len(values) == 0 {
		return nil, validation("ExpressionAttributeValues must not be empty")
	}
	if err := checkUse("ExpressionAttributeNames", "An expression attribute name used in the document path is not defined; attribute name: ", keysOf(names), usedNames); err != nil {
		return nil, err
	}
	if err := checkUse("ExpressionAttributeValues", "An expression attribute value used in expression is not defined; attribute value: ", keysOf(values), usedValues); err != nil {
		return nil, err
	}
	for _, m := range []struct {
		what string
		keys []string
	}{{"ExpressionAttributeNames", keysOf(names)}, {"ExpressionAttributeValues", keysOf(values)}} {
		for _, k := range m.keys {
			if len(k) > ddblimit.PlaceholderBytes {
				return nil, validation("%s contains invalid key: The expression attribute map contains a key that is too long; size of key: %d", m.what, len(k))
			}
		}
	}
	for k, v := range names {
		if v == "" {
			return nil, validation("ExpressionAttributeNames contains invalid value: Empty attribute name for key %s", k)
		}
	}
	vals, err := cleanItem(values)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return nil, err
		}
		return nil, validation("ExpressionAttributeValues contains invalid value: %s", errMessage(err))
	}
	r.values = vals
	if r.cond != nil {
		if err := r.checkCond(r.cond); err != nil {
			return nil, err
		}
	}
	if r.update != nil {
		if err := r.checkUpdate(); err != nil {
			return nil, err
		}
	}
	for _, p := range r.proj {
		if len(p) > 1 {
			return nil, unsupported("nested path %s in a projection expression", p)
		}
	}
	return r, nil
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func checkUse(what, undefined string, given, used []string) error {
	g := map[string]bool{}
	for _, k := range given {
		g[k] = true
	}
	u := map[string]bool{}
	for _, k := range used {
		if !g[k] {
			return validation("Invalid expression: %s%s", undefined, k)
		}
		u[k] = true
	}
	var unused []string
	for _, k := range given {
		if !u[k] {
			unused = append(unused, k)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return validation("Value provided in %s unused in expressions: keys: {%s}", what, strings.Join(unused, ", "))
	}
	return nil
}

func errMessage(err error) string {
	type msg interface{ ErrorMessage() string }
	if m, ok := err.(msg); ok {
		return m.ErrorMessage()
	}
	return err.Error()
}

func isOrderable(v types.AttributeValue) bool {
	switch v.(type) {
	case *types.AttributeValueMemberS, *types.AttributeValueMemberN, *types.AttributeValueMemberB:
		return true
	}
	return false
}

func badOperand(label, op string, v types.AttributeValue) error {
	return validation("Invalid %s: Incorrect operand type for operator or function; operator or function: %s, operand type: %s", label, op, typeName(v))
}

// checkCond applies the checks DynamoDB makes on value operands, whose types
// are known before any item is read.
func (r *request) checkCond(c *cond) error {
	const label = "ConditionExpression"
	switch c.kind {
	case cAnd, cOr:
		if err := r.checkCond(c.left); err != nil {
			return err
		}
		return r.checkCond(c.right)
	case cNot:
		return r.checkCond(c.left)
	case cCompare, cBetween, cIn:
		if err := r.checkDistinct(c); err != nil {
			return err
		}
	}
	switch c.kind {
	case cCompare:
		if c.op != "=" && c.op != "<>" {
			for _, a := range c.args {
				if a.kind == oValue && !isOrderable(r.values[a.value]) {
					return badOperand(label, c.op, r.values[a.value])
				}
			}
		}
	case cBetween:
		for _, a := range c.args {
			if a.kind == oValue && !isOrderable(r.values[a.value]) {
				return badOperand(label, "BETWEEN", r.values[a.value])
			}
		}
		if lo, hi := c.args[1], c.args[2]; lo.kind == oValue && hi.kind == oValue {
			if n, ok := compareOrdered(r.values[lo.value], r.values[hi.value]); ok && n > 0 {
				return validation("Invalid %s: The BETWEEN operator requires upper bound to be greater than or equal to lower bound", label)
			}
		}
	case cFunc:
		switch c.op {
		case "begins_with":
			if a := c.args[1]; a.kind == oValue {
				switch r.values[a.value].(type) {
				case *types.AttributeValueMemberS, *types.AttributeValueMemberB:
				default:
					return badOperand(label, c.op, r.values[a.value])
				}
			}
		case "attribute_type":
			a := c.args[1]
			if a.kind != oValue {
				return validation("Invalid %s: Incorrect operand type for operator or function; operator or function: attribute_type", label)
			}
			s, ok := r.values[a.value].(*types.AttributeValueMemberS)
			if !ok {
				return badOperand(label, c.op, r.values[a.value])
			}
			switch s.Value {
			case "S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M":
			default:
				return validation("Invalid %s: Invalid attribute type name found; type: %s, valid types: {N,BS,L,B,NULL,M,S,SS,NS,BOOL}", label, s.Value)
			}
		}
	}
	return nil
}

// checkDistinct rejects a comparison of a path with itself, as DynamoDB does
// (after placeholders are resolved).
func (r *request) checkDistinct(c *cond) error {
	first := c.args[0]
	if first.kind != oPath {
		return nil
	}
	for _, a := range c.args[1:] {
		if a.kind == oPath && r.resolved(a.path) == r.resolved(first.path) {
			op := c.op
			if c.kind == cBetween {
				op = "BETWEEN"
			} else if c.kind == cIn {
				op = "IN"
			}
			return validation("Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: %s, first operand: [%s]", op, r.resolved(first.path))
		}
	}
	return nil
}

// resolved renders a path with its placeholders replaced.
func (r *request) resolved(p path) string {
	var b strings.Builder
	for i, pp := range p {
		switch {
		case pp.isIndex:
			b.WriteString("[" + strconv.Itoa(pp.index) + "]")
		case i > 0:
			b.WriteString("." + r.name(pp))
		default:
			b.WriteString(r.name(pp))
		}
	}
	return b.String()
}

func (r *request) checkUpdate() error {
	u := r.update
	var all []path
	for _, a := range u.set {
		all = append(all, a.path)
	}
	all = append(all, u.remove...)
	for _, a := range u.add {
		all = append(all, a.path)
		switch r.values[a.value].(type) {
		case *types.AttributeValueMemberN, *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		default:
			return validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: %s, typeSet: ALLOWED_FOR_ADD_OPERAND", typeName(r.values[a.value]))
		}
	}
	for _, a := range u.del {
		all = append(all, a.path)
		switch r.values[a.value].(type) {
		case *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		default:
			return validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE, operand type: %s, typeSet: ALLOWED_FOR_DELETE_OPERAND", typeName(r.values[a.value]))
		}
	}
	for i, p := range all {
		if len(p) > 1 {
			return unsupported("nested path %s in an update expression", p)
		}
		for j := i + 1; j < len(all); j++ {
			if r.name(p[0]) == r.name(all[j][0]) {
				return validation("Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [%s], path two: [%s]", r.name(p[0]), r.name(all[j][0]))
			}
		}
	}
	return nil
}

// updatedNames lists the top-level attributes an update writes.
func (r *request) updatedNames() []string {
	var out []string
	u := r.update
	for _, a := range u.set {
		out = append(out, r.name(a.path[0]))
	}
	for _, p := range u.remove {
		out = append(out, r.name(p[0]))
	}
	for _, a := range u.add {
		out = append(out, r.name(a.path[0]))
	}
	for _, a := range u.del {
		out = append(out, r.name(a.path[0]))
	}
	return out
}

func (r *request) name(pp pathPart) string {
	if pp.isRef {
		return r.names[pp.name]
	}
	return pp.name
}

// lookup returns the value at p in it, or nil.
func (r *request) lookup(it item, p path) types.AttributeValue {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: it}
	for _, pp := range p {
		switch x := cur.(type) {
		case *types.AttributeValueMemberM:
			if pp.isIndex {
				return nil
			}
			v, ok := x.Value[r.name(pp)]
			if !ok {
				return nil
			}
			cur = v
		case *types.AttributeValueMemberL:
			if !pp.isIndex || pp.index >= len(x.Value) {
				return nil
			}
			cur = x.Value[pp.index]
		default:
			return nil
		}
	}
	return cur
}

// operandValue evaluates a condition operand; nil when it has no value
// (a missing attribute, or size() of a type without a size).
func (r *request) operandValue(it item, o *operand) types.AttributeValue {
	switch o.kind {
	case oValue:
		return r.values[o.value]
	case oPath:
		return r.lookup(it, o.path)
	case oSize:
		n := -1
		switch x := r.lookup(it, o.path).(type) {
		case *types.AttributeValueMemberS:
			n = utf8.RuneCountInString(x.Value)
		case *types.AttributeValueMemberB:
			n = len(x.Value)
		case *types.AttributeValueMemberSS:
			n = len(x.Value)
		case *types.AttributeValueMemberNS:
			n = len(x.Value)
		case *types.AttributeValueMemberBS:
			n = len(x.Value)
		case *types.AttributeValueMemberL:
			n = len(x.Value)
		case *types.AttributeValueMemberM:
			n = len(x.Value)
		}
		if n < 0 {
			return nil
		}
		return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}
	}
	return nil
}

// evalCond evaluates a condition against it (nil: no item).
func (r *request) evalCond(it item, c *cond) bool {
	switch c.kind {
	case cAnd:
		return r.evalCond(it, c.left) && r.evalCond(it, c.right)
	case cOr:
		return r.evalCond(it, c.left) || r.evalCond(it, c.right)
	case cNot:
		return !r.evalCond(it, c.left)
	case cCompare:
		a, b := r.operandValue(it, c.args[0]), r.operandValue(it, c.args[1])
		if c.op == "<>" {
			return a == nil || b == nil || !equalValues(a, b)
		}
		if a == nil || b == nil {
			return false
		}
		if c.op == "=" {
			return equalValues(a, b)
		}
		n, ok := compareOrdered(a, b)
		if !ok {
			return false
		}
		switch c.op {
		case "<":
			return n < 0
		case "<=":
			return n <= 0
		case ">":
			return n > 0
		case ">=":
			return n >= 0
		}
	case cBetween:
		x, lo, hi := r.operandValue(it, c.args[0]), r.operandValue(it, c.args[1]), r.operandValue(it, c.args[2])
		if x == nil || lo == nil || hi == nil {
			return false
		}
		n1, ok1 := compareOrdered(lo, x)
		n2, ok2 := compareOrdered(x, hi)
		return ok1 && ok2 && n1 <= 0 && n2 <= 0
	case cIn:
		x := r.operandValue(it, c.args[0])
		if x == nil {
			return false
		}
		for _, a := range c.args[1:] {
			if v := r.operandValue(it, a); v != nil && equalValues(x, v) {
				return true
			}
		}
		return false
	case cFunc:
		v := r.lookup(it, c.args[0].path)
		switch c.op {
		case "attribute_exists":
			return v != nil
		case "attribute_not_exists":
			return v == nil
		}
		if v == nil {
			return false
		}
		arg := r.operandValue(it, c.args[1])
		switch c.op {
		case "attribute_type":
			return typeName(v) == arg.(*types.AttributeValueMemberS).Value
		case "begins_with":
			switch x := v.(type) {
			case *types.AttributeValueMemberS:
				y, ok := arg.(*types.AttributeValueMemberS)
				return ok && strings.HasPrefix(x.Value, y.Value)
			case *types.AttributeValueMemberB:
				y, ok := arg.(*types.AttributeValueMemberB)
				return ok && bytes.HasPrefix(x.Value, y.Value)
			}
			return false
		case "contains":
			return contains(v, arg)
		}
	}
	return false
}

func contains(v, arg types.AttributeValue) bool {
	if arg == nil {
		return false
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		y, ok := arg.(*types.AttributeValueMemberS)
		return ok && strings.Contains(x.Value, y.Value)
	case *types.AttributeValueMemberB:
		y, ok := arg.(*types.AttributeValueMemberB)
		return ok && bytes.Contains(x.Value, y.Value)
	case *types.AttributeValueMemberSS:
		y, ok := arg.(*types.AttributeValueMemberS)
		if !ok {
			return false
		}
		for _, e := range x.Value {
			if e == y.Value {
				return true
			}
		}
	case *types.AttributeValueMemberNS:
		y, ok := arg.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		for _, e := range x.Value {
			if compareNumbers(e, y.Value) == 0 {
				return true
			}
		}
	case *types.AttributeValueMemberBS:
		y, ok := arg.(*types.AttributeValueMemberB)
		if !ok {
			return false
		}
		for _, e := range x.Value {
			if bytes.Equal(e, y.Value) {
				return true
			}
		}
	case *types.AttributeValueMemberL:
		for _, e := range x.Value {
			if equalValues(e, arg) {
				return true
			}
		}
	}
	return false
}

var (
	errNoAttribute = validation("The provided expression refers to an attribute that does not exist in the item")
	errBadType     = validation("An operand in the update expression has an incorrect data type")
)

// applyUpdate returns the item after the update; every right-hand side is
// evaluated against the old item, as DynamoDB does.
func (r *request) applyUpdate(old item) (item, error) {
	u := r.update
	next := make(item, len(old)+len(u.set))
	for k, v := range old {
		next[k] = v // values are never mutated in place, so sharing is safe
	}
	for _, a := range u.set {
		v, err := r.setValue(old, a.value)
		if err != nil {
			return nil, err
		}
		next[r.name(a.path[0])] = v
	}
	for _, p := range u.remove {
		delete(next, r.name(p[0]))
	}
	for _, a := range u.add {
		name := r.name(a.path[0])
		v, err := addValues(old[name], r.values[a.value])
		if err != nil {
			return nil, err
		}
		next[name] = v
	}
	for _, a := range u.del {
		name := r.name(a.path[0])
		v, err := deleteValues(old[name], r.values[a.value])
		if err != nil {
			return nil, err
		}
		if v == nil {
			delete(next, name)
		} else {
			next[name] = v
		}
	}
	return next, nil
}

func (r *request) setValue(old item, o *operand) (types.AttributeValue, error) {
	switch o.kind {
	case oValue:
		return copyValue(r.values[o.value]), nil
	case oPath:
		v := r.lookup(old, o.path)
		if v == nil {
			return nil, errNoAttribute
		}
		return copyValue(v), nil
	case oIfNotExists:
		if v := r.lookup(old, o.args[0].path); v != nil {
			return copyValue(v), nil
		}
		return r.setValue(old, o.args[1])
	case oListAppend:
		a, err := r.setValue(old, o.args[0])
		if err != nil {
			return nil, err
		}
		b, err := r.setValue(old, o.args[1])
		if err != nil {
			return nil, err
		}
		la, ok1 := a.(*types.AttributeValueMemberL)
		lb, ok2 := b.(*types.AttributeValueMemberL)
		if !ok1 || !ok2 {
			return nil, errBadType
		}
		return &types.AttributeValueMemberL{Value: append(append([]types.AttributeValue{}, la.Value...), lb.Value...)}, nil
	case oPlus, oMinus:
		a, err := r.setValue(old, o.args[0])
		if err != nil {
			return nil, err
		}
		b, err := r.setValue(old, o.args[1])
		if err != nil {
			return nil, err
		}
		na, ok1 := a.(*types.AttributeValueMemberN)
		nb, ok2 := b.(*types.AttributeValueMemberN)
		if !ok1 || !ok2 {
			return nil, errBadType
		}
		s, err := arith(na.Value, nb.Value, o.kind == oMinus)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: s}, nil
	}
	return nil, unsupported("operand %s in SET", o)
}

func addValues(cur, v types.AttributeValue) (types.AttributeValue, error) {
	if cur == nil {
		return copyValue(v), nil
	}
	switch x := cur.(type) {
	case *types.AttributeValueMemberN:
		y, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return nil, errBadType
		}
		s, err := arith(x.Value, y.Value, false)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: s}, nil
	case *types.AttributeValueMemberSS:
		y, ok := v.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, errBadType
		}
		return &types.AttributeValueMemberSS{Value: union(x.Value, y.Value)}, nil
	case *types.AttributeValueMemberNS:
		y, ok := v.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, errBadType
		}
		return &types.AttributeValueMemberNS{Value: union(x.Value, y.Value)}, nil
	case *types.AttributeValueMemberBS:
		y, ok := v.(*types.AttributeValueMemberBS)
		if !ok {
			return nil, errBadType
		}
		out := append([][]byte{}, x.Value...)
		for _, b := range y.Value {
			if !containsBytes(out, b) {
				out = append(out, bytes.Clone(b))
			}
		}
		return &types.AttributeValueMemberBS{Value: out}, nil
	}
	return nil, errBadType
}

// deleteValues removes v's elements from the set cur; nil means the set is
// now empty (DynamoDB removes the attribute).
func deleteValues(cur, v types.AttributeValue) (types.AttributeValue, error) {
	if cur == nil {
		return nil, nil
	}
	switch x := cur.(type) {
	case *types.AttributeValueMemberSS:
		y, ok := v.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, errBadType
		}
		if out := minus(x.Value, y.Value); len(out) > 0 {
			return &types.AttributeValueMemberSS{Value: out}, nil
		}
		return nil, nil
	case *types.AttributeValueMemberNS:
		y, ok := v.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, errBadType
		}
		if out := minus(x.Value, y.Value); len(out) > 0 {
			return &types.AttributeValueMemberNS{Value: out}, nil
		}
		return nil, nil
	case *types.AttributeValueMemberBS:
		y, ok := v.(*types.AttributeValueMemberBS)
		if !ok {
			return nil, errBadType
		}
		var out [][]byte
		for _, b := range x.Value {
			if !containsBytes(y.Value, b) {
				out = append(out, b)
			}
		}
		if len(out) > 0 {
			return &types.AttributeValueMemberBS{Value: out}, nil
		}
		return nil, nil
	}
	return nil, errBadType
}

func union(a, b []string) []string {
	out := append([]string{}, a...)
	for _, s := range b {
		if !containsString(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !containsString(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, e := range list {
		if bytes.Equal(e, b) {
			return true
		}
	}
	return false
}
