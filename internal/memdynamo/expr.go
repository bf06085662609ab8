package memdynamo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// This file parses the expression language: condition, update and
// projection expressions. Parsed expressions are cached by their text; names
// and values are resolved per request.

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tName  // #placeholder
	tValue // :placeholder
	tInt
	tPunct // ( ) , . [ ] = <> < <= > >= + -
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func lex(s string) ([]token, error) {
	var toks []token
	isWord := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j], i})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			toks = append(toks, token{tInt, s[i:j], i})
			i = j
		case c == '#' || c == ':':
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("Syntax error; token: %q, near: %q", string(c), near(s, i))
			}
			k := tName
			if c == ':' {
				k = tValue
			}
			toks = append(toks, token{k, s[i:j], i})
			i = j
		case c == '<' && i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '='):
			toks = append(toks, token{tPunct, s[i : i+2], i})
			i += 2
		case c == '>' && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, token{tPunct, ">=", i})
			i += 2
		case strings.IndexByte("(),.[]=<>+-", c) >= 0:
			toks = append(toks, token{tPunct, string(c), i})
			i++
		default:
			return nil, fmt.Errorf("Syntax error; token: %q, near: %q", string(c), near(s, i))
		}
	}
	return append(toks, token{tEOF, "<EOF>", len(s)}), nil
}

func near(s string, i int) string {
	lo, hi := max(i-8, 0), min(i+8, len(s))
	return s[lo:hi]
}

// pathPart is one step of a document path: a name (bare or #placeholder)
// or a list index.
type pathPart struct {
	name    string
	isRef   bool
	index   int
	isIndex bool
}

type path []pathPart

func (p path) String() string {
	var b strings.Builder
	for i, pp := range p {
		switch {
		case pp.isIndex:
			fmt.Fprintf(&b, "[%d]", pp.index)
		case i > 0:
			b.WriteString("." + pp.name)
		default:
			b.WriteString(pp.name)
		}
	}
	return b.String()
}

type operandKind int

const (
	oPath operandKind = iota
	oValue
	oSize
	oIfNotExists
	oListAppend
	oPlus
	oMinus
)

type operand struct {
	kind  operandKind
	path  path
	value string // :placeholder
	args  []*operand
}

func (o *operand) String() string {
	switch o.kind {
	case oPath:
		return o.path.String()
	case oValue:
		return o.value
	case oSize:
		return "size(" + o.path.String() + ")"
	case oIfNotExists:
		return "if_not_exists(" + o.args[0].String() + ", " + o.args[1].String() + ")"
	case oListAppend:
		return "list_append(" + o.args[0].String() + ", " + o.args[1].String() + ")"
	case oPlus:
		return o.args[0].String() + " + " + o.args[1].String()
	case oMinus:
		return o.args[0].String() + " - " + o.args[1].String()
	}
	return "?"
}

type condKind int

const (
	cAnd condKind = iota
	cOr
	cNot
	cCompare // op: = <> < <= > >=
	cBetween
	cIn
	cFunc // op: function name
)

type cond struct {
	kind        condKind
	op          string
	left, right *cond
	args        []*operand
}

type setAction struct {
	path  path
	value *operand
}

type addAction struct {
	path  path
	value string // :placeholder
}

type update struct {
	set    []setAction
	remove []path
	add    []addAction
	del    []addAction
}

// parsed is a cached parse of one expression with the placeholders it uses.
type parsed struct {
	cond   *cond
	update *update
	proj   []path
	names  []string // #placeholders used
	values []string // :placeholders used
	err    error
}

type exprKind int

const (
	kindCondition exprKind = iota
	kindUpdate
	kindProjection
	kindKeyCondition
)

func (k exprKind) label() string {
	switch k {
	case kindUpdate:
		return "UpdateExpression"
	case kindProjection:
		return "ProjectionExpression"
	case kindKeyCondition:
		return "KeyConditionExpression"
	}
	return "ConditionExpression"
}

var cache sync.Map // exprKind + text -> *parsed

func parseExpr(kind exprKind, text string) *parsed {
	key := strconv.Itoa(int(kind)) + text
	if p, ok := cache.Load(key); ok {
		return p.(*parsed)
	}
	p := doParse(kind, text)
	if p.err != nil {
		p.err = validation("Invalid %s: %s", kind.label(), p.err.Error())
	}
	cache.Store(key, p)
	return p
}

type parser struct {
	toks   []token
	i      int
	src    string
	names  map[string]bool
	values map[string]bool
}

func doParse(kind exprKind, text string) *parsed {
	if strings.TrimSpace(text) == "" {
		return &parsed{err: errors.New("The expression can not be empty;")}
	}
	toks, err := lex(text)
	if err != nil {
		return &parsed{err: err}
	}
	p := &parser{toks: toks, src: text, names: map[string]bool{}, values: map[string]bool{}}
	out := &parsed{}
	switch kind {
	case kindCondition, kindKeyCondition:
		out.cond, err = p.parseOr()
	case kindUpdate:
		out.update, err = p.parseUpdate()
	case kindProjection:
		out.proj, err = p.parseProjection()
	}
	if err == nil && p.peek().kind != tEOF {
		err = p.syntax()
	}
	if err != nil {
		return &parsed{err: err}
	}
	for n := range p.names {
		out.names = append(out.names, n)
	}
	for v := range p.values {
		out.values = append(out.values, v)
	}
	return out
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) syntax() error {
	t := p.peek()
	return fmt.Errorf("Syntax error; token: %q, near: %q", t.text, near(p.src, t.pos))
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

func (p *parser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

func (p *parser) expect(s string) error {
	if !p.isPunct(s) {
		return p.syntax()
	}
	p.next()
	return nil
}

// Conditions, lowest precedence first: OR, AND, NOT, then the rest.

func (p *parser) parseOr() (*cond, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("OR") {
		p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &cond{kind: cOr, left: l, right: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (*cond, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("AND") {
		p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &cond{kind: cAnd, left: l, right: r}
	}
	return l, nil
}

func (p *parser) parseNot() (*cond, error) {
	if p.isKeyword("NOT") {
		p.next()
		c, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &cond{kind: cNot, left: c}, nil
	}
	return p.parsePrimary()
}

var boolFuncs = map[string]int{ // name -> arity
	"attribute_exists":     1,
	"attribute_not_exists": 1,
	"attribute_type":       2,
	"begins_with":          2,
	"contains":             2,
}

func (p *parser) parsePrimary() (*cond, error) {
	if p.isPunct("(") {
		// A parenthesised condition. (DynamoDB also accepts a parenthesised
		// operand; this implementation does not.)
		p.next()
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return c, nil
	}
	t := p.peek()
	if t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(" {
		if arity, ok := boolFuncs[t.text]; ok {
			p.next()
			p.next()
			args, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			if len(args) != arity {
				return nil, fmt.Errorf("Incorrect number of operands for operator or function; operator or function: %s, number of operands: %d", t.text, len(args))
			}
			if args[0].kind != oPath {
				return nil, fmt.Errorf("Operator or function requires a document path; operator or function: %s", t.text)
			}
			return &cond{kind: cFunc, op: t.text, args: args}, nil
		}
	}
	l, err := p.parseCondOperand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.peek().kind == tPunct && isComparator(p.peek().text):
		op := p.next().text
		r, err := p.parseCondOperand()
		if err != nil {
			return nil, err
		}
		return &cond{kind: cCompare, op: op, args: []*operand{l, r}}, nil
	case p.isKeyword("BETWEEN"):
		p.next()
		lo, err := p.parseCondOperand()
		if err != nil {
			return nil, err
		}
		if !p.isKeyword("AND") {
			return nil, p.syntax()
		}
		p.next()
		hi, err := p.parseCondOperand()
		if err != nil {
			return nil, err
		}
		return &cond{kind: cBetween, args: []*operand{l, lo, hi}}, nil
	case p.isKeyword("IN"):
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		args, err := p.parseArgs()
		if err != nil {
			return nil, err
		}
		if len(args) > 100 {
			return nil, fmt.Errorf("The IN operator is provided with too many operands; number of operands: %d", len(args))
		}
		return &cond{kind: cIn, args: append([]*operand{l}, args...)}, nil
	}
	return nil, p.syntax()
}

func isComparator(s string) bool {
	switch s {
	case "=", "<>", "<", "<=", ">", ">=":
		return true
	}
	return false
}

// parseArgs parses "a, b, c)" after an opening parenthesis.
func (p *parser) parseArgs() ([]*operand, error) {
	var args []*operand
	for {
		a, err := p.parseCondOperand()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.isPunct(",") {
			p.next()
			continue
		}
		return args, p.expect(")")
	}
}

// parseCondOperand: path, :value or size(path).
func (p *parser) parseCondOperand() (*operand, error) {
	t := p.peek()
	switch {
	case t.kind == tValue:
		p.next()
		p.values[t.text] = true
		return &operand{kind: oValue, value: t.text}, nil
	case t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(":
		if t.text != "size" {
			if _, ok := boolFuncs[t.text]; ok {
				return nil, fmt.Errorf("The function is not allowed to be used this way in an expression; function: %s", t.text)
			}
			return nil, fmt.Errorf("Invalid function name; function: %s", t.text)
		}
		p.next()
		p.next()
		args, err := p.parseArgs()
		if err != nil {
			return nil, err
		}
		if len(args) != 1 {
			return nil, fmt.Errorf("Incorrect number of operands for operator or function; operator or function: size, number of operands: %d", len(args))
		}
		if args[0].kind != oPath {
			return nil, fmt.Errorf("Operator or function requires a document path; operator or function: size")
		}
		return &operand{kind: oSize, path: args[0].path}, nil
	case t.kind == tIdent || t.kind == tName:
		pth, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		return &operand{kind: oPath, path: pth}, nil
	}
	return nil, p.syntax()
}

func (p *parser) parsePath() (path, error) {
	var out path
	name := func() error {
		t := p.next()
		switch t.kind {
		case tName:
			p.names[t.text] = true
			out = append(out, pathPart{name: t.text, isRef: true})
		case tIdent:
			if reserved[strings.ToLower(t.text)] {
				return fmt.Errorf("Attribute name is a reserved keyword; reserved keyword: %s", t.text)
			}
			out = append(out, pathPart{name: t.text})
		default:
			p.i--
			return p.syntax()
		}
		return nil
	}
	if err := name(); err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isPunct("."):
			p.next()
			if err := name(); err != nil {
				return nil, err
			}
		case p.isPunct("["):
			p.next()
			t := p.next()
			if t.kind != tInt {
				p.i--
				return nil, p.syntax()
			}
			n, err := strconv.Atoi(t.text)
			if err != nil {
				return nil, p.syntax()
			}
			out = append(out, pathPart{index: n, isIndex: true})
			if err := p.expect("]"); err != nil {
				return nil, err
			}
		default:
			return out, nil
		}
	}
}

// Update expressions.

func (p *parser) parseUpdate() (*update, error) {
	u := &update{}
	seen := map[string]bool{}
	for p.peek().kind != tEOF {
		t := p.next()
		clause := strings.ToUpper(t.text)
		if t.kind != tIdent || (clause != "SET" && clause != "REMOVE" && clause != "ADD" && clause != "DELETE") {
			p.i--
			return nil, p.syntax()
		}
		if seen[clause] {
			return nil, fmt.Errorf("The %q section can only be used once in an update expression;", clause)
		}
		seen[clause] = true
		for {
			pth, err := p.parsePath()
			if err != nil {
				return nil, err
			}
			switch clause {
			case "SET":
				if err := p.expect("="); err != nil {
					return nil, err
				}
				v, err := p.parseSetValue()
				if err != nil {
					return nil, err
				}
				u.set = append(u.set, setAction{pth, v})
			case "REMOVE":
				u.remove = append(u.remove, pth)
			case "ADD", "DELETE":
				vt := p.next()
				if vt.kind != tValue {
					p.i--
					return nil, p.syntax()
				}
				p.values[vt.text] = true
				if clause == "ADD" {
					u.add = append(u.add, addAction{pth, vt.text})
				} else {
					u.del = append(u.del, addAction{pth, vt.text})
				}
			}
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
	}
	// No two actions may touch overlapping paths.
	var all []path
	for _, a := range u.set {
		all = append(all, a.path)
	}
	all = append(all, u.remove...)
	for _, a := range u.add {
		all = append(all, a.path)
	}
	for _, a := range u.del {
		all = append(all, a.path)
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if overlaps(all[i], all[j]) {
				return nil, fmt.Errorf("Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [%s], path two: [%s]", all[i], all[j])
			}
		}
	}
	return u, nil
}

// overlaps compares paths by their text; placeholders are compared after
// resolution in validateUpdate.
func overlaps(a, b path) bool {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parseSetValue: operand [ + | - operand ].
func (p *parser) parseSetValue() (*operand, error) {
	l, err := p.parseSetOperand()
	if err != nil {
		return nil, err
	}
	if p.isPunct("+") || p.isPunct("-") {
		k := oPlus
		if p.next().text == "-" {
			k = oMinus
		}
		r, err := p.parseSetOperand()
		if err != nil {
			return nil, err
		}
		return &operand{kind: k, args: []*operand{l, r}}, nil
	}
	return l, nil
}

func (p *parser) parseSetOperand() (*operand, error) {
	t := p.peek()
	switch {
	case t.kind == tValue:
		p.next()
		p.values[t.text] = true
		return &operand{kind: oValue, value: t.text}, nil
	case t.kind == tIdent && p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(":
		var k operandKind
		switch t.text {
		case "if_not_exists":
			k = oIfNotExists
		case "list_append":
			k = oListAppend
		default:
			return nil, fmt.Errorf("Invalid function name; function: %s", t.text)
		}
		p.next()
		p.next()
		a, err := p.parseSetOperand()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		b, err := p.parseSetOperand()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		if k == oIfNotExists && a.kind != oPath {
			return nil, fmt.Errorf("Operator or function requires a document path; operator or function: if_not_exists")
		}
		return &operand{kind: k, args: []*operand{a, b}}, nil
	case t.kind == tIdent || t.kind == tName:
		pth, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		return &operand{kind: oPath, path: pth}, nil
	}
	return nil, p.syntax()
}

func (p *parser) parseProjection() ([]path, error) {
	var out []path
	for {
		pth, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		out = append(out, pth)
		if !p.isPunct(",") {
			return out, nil
		}
		p.next()
	}
}
