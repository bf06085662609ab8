// Package terraform_test checks the Terraform under infra/terraform offline
// (from the tools module, so that hcl/v2 and go-cty stay out of the library's go.mod).
//
// terraform validate needs the AWS provider, which cannot be downloaded where
// CI runs, so these tests parse the .tf files with hcl/v2 instead. They check
// that every reference resolves and every module call fits the called module,
// and they evaluate the expressions the worker depends on (names, TTL
// attribute, FIFO settings, IAM actions, timeouts) with go-cty, the same
// evaluator Terraform uses.
package terraform_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
)

// What the worker expects of the infrastructure, from the worker's own
// constants: a change on either side that breaks the other fails here.
var (
	workerHashKey      = dedup.AttrPK
	workerTTLAttribute = dedup.AttrExpiresAt
	workerDedupTable   = cli.DefaultDedupTable
	workerLedgerTable  = cli.DefaultLedgerTable
	workerShutdownSecs = int64(pool.DefaultShutdownTimeout / time.Second)
)

// customEffectRoot deploys examples/custom-effect with the modules.
const customEffectRoot = "../../examples/custom-effect/terraform"

const (
	fargateMaxStopSecs = 120
	fifoMaxBatchSize   = 10
)

// managedSettings are the worker settings the worker modules set from their
// variables; the others (WORKER_LEASE, ...) can go through var.environment.
var managedSettings = []string{
	"WORKER_QUEUES", "WORKER_DEDUP_TABLE", "WORKER_EFFECT", "WORKER_LEDGER_TABLE",
	"WORKER_DEDUP_KEY", "WORKER_DEDUP_TTL", "WORKER_CONCURRENCY", "WORKER_SHUTDOWN_TIMEOUT",
	"WORKER_METRICS_ADDR", "WORKER_HTTP_URL", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL",
	"WORKER_MOVE_TO_DLQ", "WORKER_NAMESPACE", "WORKER_METRICS_FORMAT", "WORKER_OUTBOX_TABLE",
}

// knownSettings are the WORKER_* variables the worker's source reads.
func knownSettings(t *testing.T) []string {
	t.Helper()
	var found []string
	for _, pattern := range []string{"../../*.go", "../../cmd/*/*.go", "../../worker/*.go", "../../effect/*.go", "../../outbox/*.go", "../../internal/*/*.go"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range regexp.MustCompile(`"(WORKER_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
				if !slices.Contains(found, m[1]) {
					found = append(found, m[1])
				}
			}
		}
	}
	require.NotEmpty(t, found, "no WORKER_* setting found in the worker's source")
	return found
}

func TestManagedSettingsExistInTheWorker(t *testing.T) {
	known := knownSettings(t)
	for _, name := range managedSettings {
		if slices.Contains(outboxSettings, name) {
			continue // TestOutboxSettingsExistInTheWorker
		}
		require.Contains(t, known, name, "the worker reads no %s", name)
	}
}

// The AWS calls the worker makes, by IAM policy statement. The event source
// mapping of the Lambda module needs ReceiveMessage, DeleteMessage,
// GetQueueAttributes and ChangeMessageVisibility, which Consume already has.
var workerActions = map[string][]string{
	"Consume": {
		"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
		"sqs:GetQueueUrl", "sqs:ReceiveMessage",
	},
	"DeadLetter": {"sqs:GetQueueUrl", "sqs:SendMessage"},
	// The claim (PutItem), complete, extend and release (UpdateItem, also
	// as the dedup item of a TransactWriteItems) and the start-up check
	// (DescribeTable, DescribeTimeToLive): never DeleteItem, which could
	// erase a record and reopen a double effect.
	"DedupTable": {
		"dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive", "dynamodb:PutItem", "dynamodb:UpdateItem",
	},
	// The ledger effect's transaction: an Update of the account, a Put of
	// the entry.
	"LedgerTable": {"dynamodb:PutItem", "dynamodb:UpdateItem"},
	// With outbox_table_name only (TestWorkerOutboxGrantOnlyWithTheTable):
	// an effect that sends through the outbox reads its group's head and
	// writes the message and the head in its transaction.
	"OutboxTable": workerOutboxActions,
	"QueueKeys":   {"kms:Decrypt", "kms:GenerateDataKey"},
}

// ---------------------------------------------------------------------------
// Loading modules

type module struct {
	dir       string
	src       map[string][]byte // file name -> bytes
	variables map[string]*hclsyntax.Block
	locals    map[string]*hclsyntax.Attribute
	resources map[string]*hclsyntax.Block // "type.name"
	data      map[string]*hclsyntax.Block // "type.name"
	calls     map[string]*hclsyntax.Block // module "name"
	outputs   map[string]*hclsyntax.Block
	providers []*hclsyntax.Block
	bodies    []*hclsyntax.Body
}

var moduleCache = map[string]*module{}

func load(t *testing.T, dir string) *module {
	t.Helper()
	dir = filepath.Clean(dir)
	if m, ok := moduleCache[dir]; ok {
		return m
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no .tf files in %s", dir)

	m := &module{
		dir:       dir,
		src:       map[string][]byte{},
		variables: map[string]*hclsyntax.Block{},
		locals:    map[string]*hclsyntax.Attribute{},
		resources: map[string]*hclsyntax.Block{},
		data:      map[string]*hclsyntax.Block{},
		calls:     map[string]*hclsyntax.Block{},
		outputs:   map[string]*hclsyntax.Block{},
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
		require.False(t, diags.HasErrors(), "cannot parse %s: %s", file, diags.Error())
		m.src[file] = src
		body := f.Body.(*hclsyntax.Body)
		m.bodies = append(m.bodies, body)
		require.Empty(t, body.Attributes, "%s: top-level attributes are not Terraform", file)

		for _, b := range body.Blocks {
			declare := func(into map[string]*hclsyntax.Block, key string) {
				_, dup := into[key]
				require.False(t, dup, "%s: %s %q declared twice", file, b.Type, key)
				into[key] = b
			}
			switch b.Type {
			case "variable":
				declare(m.variables, b.Labels[0])
			case "resource":
				declare(m.resources, b.Labels[0]+"."+b.Labels[1])
			case "data":
				declare(m.data, b.Labels[0]+"."+b.Labels[1])
			case "module":
				declare(m.calls, b.Labels[0])
			case "output":
				declare(m.outputs, b.Labels[0])
			case "locals":
				for name, a := range b.Body.Attributes {
					_, dup := m.locals[name]
					require.False(t, dup, "%s: local %q declared twice", file, name)
					m.locals[name] = a
				}
			case "provider":
				m.providers = append(m.providers, b)
			case "terraform":
			default:
				t.Fatalf("%s: unexpected top-level block %q", file, b.Type)
			}
		}
	}
	moduleCache[dir] = m
	return m
}

func moduleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, pattern := range []string{"modules/*", "examples/*", "local", customEffectRoot} {
		found, err := filepath.Glob(pattern)
		require.NoError(t, err)
		dirs = append(dirs, found...)
	}
	require.NotEmpty(t, dirs)
	sort.Strings(dirs)
	return dirs
}

func (m *module) resource(t *testing.T, key string) *hclsyntax.Block {
	t.Helper()
	b, ok := m.resources[key]
	require.True(t, ok, "%s: resource %s is missing", m.dir, key)
	return b
}

func (m *module) dataSource(t *testing.T, key string) *hclsyntax.Block {
	t.Helper()
	b, ok := m.data[key]
	require.True(t, ok, "%s: data %s is missing", m.dir, key)
	return b
}

func (m *module) call(t *testing.T, name string) *hclsyntax.Block {
	t.Helper()
	b, ok := m.calls[name]
	require.True(t, ok, "%s: module %s is missing", m.dir, name)
	return b
}

// text is the source text of a node, for comparing references.
func (m *module) text(n hclsyntax.Node) string {
	r := n.Range()
	return string(m.src[r.Filename][r.Start.Byte:r.End.Byte])
}

// attr finds an attribute, following nested blocks by type.
func attr(t *testing.T, body *hclsyntax.Body, path ...string) *hclsyntax.Attribute {
	t.Helper()
	for _, blockType := range path[:len(path)-1] {
		body = nestedBlock(t, body, blockType).Body
	}
	a, ok := body.Attributes[path[len(path)-1]]
	require.True(t, ok, "attribute %s is missing", strings.Join(path, "."))
	return a
}

func nestedBlock(t *testing.T, body *hclsyntax.Body, blockType string) *hclsyntax.Block {
	t.Helper()
	var found []*hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == blockType {
			found = append(found, b)
		}
	}
	require.Len(t, found, 1, "want exactly one %s block", blockType)
	return found[0]
}

// ---------------------------------------------------------------------------
// Evaluating expressions

var functions = map[string]function.Function{
	"alltrue":         allTrueFunc,
	"can":             tryfunc.CanFunc,
	"coalesce":        stdlib.CoalesceFunc,
	"compact":         stdlib.CompactFunc,
	"concat":          stdlib.ConcatFunc,
	"contains":        stdlib.ContainsFunc,
	"distinct":        stdlib.DistinctFunc,
	"endswith":        endsWithFunc,
	"floor":           stdlib.FloorFunc,
	"join":            stdlib.JoinFunc,
	"jsondecode":      stdlib.JSONDecodeFunc,
	"jsonencode":      stdlib.JSONEncodeFunc,
	"keys":            stdlib.KeysFunc,
	"length":          lengthFunc,
	"merge":           stdlib.MergeFunc,
	"one":             oneFunc,
	"range":           stdlib.RangeFunc,
	"regex":           stdlib.RegexFunc,
	"slice":           stdlib.SliceFunc,
	"sort":            stdlib.SortFunc,
	"split":           stdlib.SplitFunc,
	"setintersection": stdlib.SetIntersectionFunc,
	"tostring":        stdlib.MakeToFunc(cty.String),
	"trimsuffix":      stdlib.TrimSuffixFunc,
	"try":             tryfunc.TryFunc,
	"values":          stdlib.ValuesFunc,
}

// lengthFunc is Terraform's length: an object (such as a map variable's
// literal default, {}) counts its attributes, a string its characters.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true, AllowMarked: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		if args[0].Type().IsObjectType() {
			return cty.NumberIntVal(int64(len(args[0].Type().AttributeTypes()))), nil
		}
		if args[0].Type() == cty.String {
			return stdlib.StrlenFunc.Call(args)
		}
		return stdlib.LengthFunc.Call(args)
	},
})

// oneFunc is Terraform's one: the element of a list or tuple of at most one, or null.
var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType() && len(ty.TupleElementTypes()) == 1:
			return ty.TupleElementTypes()[0], nil
		case ty.IsTupleType() && len(ty.TupleElementTypes()) == 0:
			return cty.DynamicPseudoType, nil
		}
		return cty.NilType, fmt.Errorf("one: want a list or tuple of at most one element, got %s", ty.FriendlyName())
	},
	Impl: func(args []cty.Value, ret cty.Type) (cty.Value, error) {
		if args[0].LengthInt() == 0 {
			return cty.NullVal(ret), nil
		}
		if args[0].LengthInt() > 1 {
			return cty.NilVal, fmt.Errorf("one: %d elements", args[0].LengthInt())
		}
		it := args[0].ElementIterator()
		it.Next()
		_, v := it.Element()
		return v, nil
	},
})

// endsWithFunc is Terraform's endswith.
var endsWithFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "suffix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasSuffix(args[0].AsString(), args[1].AsString())), nil
	},
})

var allTrueFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			if _, v := it.Element(); v.IsNull() || v.False() {
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

// scope holds the names an expression is evaluated with.
type scope map[string]map[string]cty.Value

func (s scope) ctx() *hcl.EvalContext {
	vars := map[string]cty.Value{}
	for root, values := range s {
		vars[root] = cty.ObjectVal(values)
	}
	return &hcl.EvalContext{Variables: vars, Functions: functions}
}

func eval(t *testing.T, expr hclsyntax.Expression, s scope) cty.Value {
	t.Helper()
	v, diags := expr.Value(s.ctx())
	require.False(t, diags.HasErrors(), "cannot evaluate: %s", diags.Error())
	return v
}

// defaults are the variables' default values.
func (m *module) defaults(t *testing.T) map[string]cty.Value {
	t.Helper()
	out := map[string]cty.Value{}
	for name, b := range m.variables {
		if a, ok := b.Body.Attributes["default"]; ok {
			out[name] = eval(t, a.Expr, nil)
		}
	}
	return out
}

// withVars returns the defaults overridden by vars.
func (m *module) withVars(t *testing.T, vars map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	out := m.defaults(t)
	for k, v := range vars {
		_, ok := m.variables[k]
		require.True(t, ok, "%s has no variable %s", m.dir, k)
		out[k] = v
	}
	return out
}

// evalLocals evaluates every local that depends only on variables and other
// such locals; locals that reference resources stay out.
func (m *module) evalLocals(vars map[string]cty.Value) map[string]cty.Value {
	done := map[string]cty.Value{}
	for progress := true; progress; {
		progress = false
		for name, a := range m.locals {
			if _, ok := done[name]; ok {
				continue
			}
			s := scope{"var": vars, "local": done, "path": {"module": str(m.dir), "root": str(m.dir)}}
			v, diags := a.Expr.Value(s.ctx())
			if !diags.HasErrors() {
				done[name] = v
				progress = true
			}
		}
	}
	return done
}

// valid reports whether value passes every validation block of a variable.
func (m *module) valid(t *testing.T, name string, value cty.Value) bool {
	t.Helper()
	b, ok := m.variables[name]
	require.True(t, ok, "%s has no variable %s", m.dir, name)
	ok = true
	for _, v := range b.Body.Blocks {
		if v.Type != "validation" {
			continue
		}
		res := eval(t, attr(t, v.Body, "condition").Expr, scope{"var": {name: value}})
		ok = ok && res.True()
	}
	return ok
}

// preconditions evaluates every precondition of a block; it returns false if any fails.
func preconditions(t *testing.T, b *hclsyntax.Block, s scope) bool {
	t.Helper()
	lc := nestedBlock(t, b.Body, "lifecycle")
	ok := true
	n := 0
	for _, p := range lc.Body.Blocks {
		if p.Type != "precondition" {
			continue
		}
		n++
		ok = ok && eval(t, attr(t, p.Body, "condition").Expr, s).True()
	}
	require.NotZero(t, n, "no precondition")
	return ok
}

// literal evaluates an expression that must not reference anything.
func literal(t *testing.T, expr hclsyntax.Expression) cty.Value {
	t.Helper()
	require.Empty(t, expr.Variables(), "want a literal, found references")
	return eval(t, expr, nil)
}

func stringList(t *testing.T, v cty.Value) []string {
	t.Helper()
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		require.Equal(t, cty.String, e.Type())
		out = append(out, e.AsString())
	}
	return out
}

func num(n int64) cty.Value   { return cty.NumberIntVal(n) }
func str(s string) cty.Value  { return cty.StringVal(s) }
func nullString() cty.Value   { return cty.NullVal(cty.String) }
func asInt(v cty.Value) int64 { i, _ := v.AsBigFloat().Int64(); return i }

// objectKeys maps the keys of an object constructor to their value expressions.
func objectKeys(t *testing.T, expr hclsyntax.Expression) map[string]hclsyntax.Expression {
	t.Helper()
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	require.True(t, ok, "want an object constructor, got %T", expr)
	out := map[string]hclsyntax.Expression{}
	for _, item := range obj.Items {
		key := hcl.ExprAsKeyword(item.KeyExpr)
		if key == "" {
			k, diags := item.KeyExpr.Value(nil)
			require.False(t, diags.HasErrors(), diags.Error())
			key = k.AsString()
		}
		out[key] = item.ValueExpr
	}
	return out
}

// jsonencodeArg returns the argument of jsonencode(...).
func jsonencodeArg(t *testing.T, expr hclsyntax.Expression) hclsyntax.Expression {
	t.Helper()
	call, ok := expr.(*hclsyntax.FunctionCallExpr)
	require.True(t, ok, "want jsonencode(...), got %T", expr)
	require.Equal(t, "jsonencode", call.Name)
	require.Len(t, call.Args, 1)
	return call.Args[0]
}

// ---------------------------------------------------------------------------
// References

// metaArguments of a module call that are not input variables.
var metaArguments = []string{"source", "version", "count", "for_each", "providers", "depends_on"}

// builtinRoots may start any reference; "each", "count" and "self" are checked where they appear.
var builtinRoots = []string{"var", "local", "module", "data", "path", "terraform"}

func TestEveryReferenceIsDeclared(t *testing.T) {
	for _, dir := range moduleDirs(t) {
		t.Run(dir, func(t *testing.T) {
			m := load(t, dir)
			for _, body := range m.bodies {
				for _, b := range body.Blocks {
					checkTopBlock(t, m, b)
				}
			}
		})
	}
}

func checkTopBlock(t *testing.T, m *module, b *hclsyntax.Block) {
	t.Helper()
	where := b.Type + " " + strings.Join(b.Labels, ".")
	allowed := map[string]bool{}
	if _, ok := b.Body.Attributes["for_each"]; ok {
		allowed["each"] = true
	}
	if _, ok := b.Body.Attributes["count"]; ok {
		allowed["count"] = true
	}

	switch b.Type {
	case "terraform":
		return
	case "variable":
		// A validation may reference only its own variable before Terraform 1.9,
		// and required_version admits 1.5.
		for _, v := range b.Body.Blocks {
			if v.Type != "validation" {
				continue
			}
			for _, a := range v.Body.Attributes {
				for _, tr := range a.Expr.Variables() {
					require.Equal(t, "var."+b.Labels[0], traversalName(tr, 2),
						"%s: %s: a validation may only reference its own variable", m.dir, where)
				}
			}
		}
		if a, ok := b.Body.Attributes["default"]; ok {
			require.Empty(t, a.Expr.Variables(), "%s: %s: a default must be a literal", m.dir, where)
		}
		return
	case "module":
		checkModuleCall(t, m, b)
	}
	checkBody(t, m, where, b.Body, allowed)
}

func checkBody(t *testing.T, m *module, where string, body *hclsyntax.Body, allowed map[string]bool) {
	t.Helper()
	for name, a := range body.Attributes {
		if name == "ignore_changes" || name == "provider" || name == "source" {
			continue // attribute names, a provider address, a path
		}
		checkExpr(t, m, where+"."+name, a.Expr, allowed)
	}
	for _, b := range body.Blocks {
		inner := allowed
		switch b.Type {
		case "dynamic":
			iterator := b.Labels[0]
			if it, ok := b.Body.Attributes["iterator"]; ok {
				iterator = hcl.ExprAsKeyword(it.Expr)
			}
			checkExpr(t, m, where+".dynamic."+b.Labels[0]+".for_each", attr(t, b.Body, "for_each").Expr, allowed)
			inner = with(allowed, iterator)
			content := nestedBlock(t, b.Body, "content")
			checkBody(t, m, where+".dynamic."+b.Labels[0], content.Body, inner)
			continue
		case "postcondition":
			inner = with(allowed, "self")
		}
		checkBody(t, m, where+"."+b.Type, b.Body, inner)
	}
}

func with(allowed map[string]bool, name string) map[string]bool {
	out := map[string]bool{name: true}
	for k, v := range allowed {
		out[k] = v
	}
	return out
}

func traversalName(tr hcl.Traversal, parts int) string {
	names := []string{tr.RootName()}
	for _, step := range tr[1:] {
		if len(names) == parts {
			break
		}
		a, ok := step.(hcl.TraverseAttr)
		if !ok {
			break
		}
		names = append(names, a.Name)
	}
	return strings.Join(names, ".")
}

func checkExpr(t *testing.T, m *module, where string, expr hclsyntax.Expression, allowed map[string]bool) {
	t.Helper()
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		ref := traversalName(tr, 3)
		switch {
		case allowed[root]:
		case root == "each" || root == "count" || root == "self":
			t.Errorf("%s: %s: %q is not available here", m.dir, where, ref)
		case root == "var":
			if _, ok := m.variables[nameAt(tr, 1)]; !ok {
				t.Errorf("%s: %s: undeclared variable %s", m.dir, where, ref)
			}
		case root == "local":
			if _, ok := m.locals[nameAt(tr, 1)]; !ok {
				t.Errorf("%s: %s: undeclared local %s", m.dir, where, ref)
			}
		case root == "data":
			if _, ok := m.data[nameAt(tr, 1)+"."+nameAt(tr, 2)]; !ok {
				t.Errorf("%s: %s: undeclared data source %s", m.dir, where, ref)
			}
		case root == "module":
			call, ok := m.calls[nameAt(tr, 1)]
			if !ok {
				t.Errorf("%s: %s: undeclared module %s", m.dir, where, ref)
				continue
			}
			if out := moduleOutput(tr); out != "" {
				callee := load(t, calleeDir(t, m, call))
				if _, ok := callee.outputs[out]; !ok {
					t.Errorf("%s: %s: module %s has no output %s", m.dir, where, nameAt(tr, 1), out)
				}
			}
		case slices.Contains(builtinRoots, root):
		default:
			if _, ok := m.resources[root+"."+nameAt(tr, 1)]; !ok {
				t.Errorf("%s: %s: undeclared resource %s", m.dir, where, traversalName(tr, 2))
			}
		}
	}
}

// moduleOutput is the output a module.<name>... reference reads, past an
// index of a module with count or for_each (module.x[0].out); "" if none.
func moduleOutput(tr hcl.Traversal) string {
	i := 2
	if i < len(tr) {
		if _, ok := tr[i].(hcl.TraverseIndex); ok {
			i++
		}
	}
	return nameAt(tr, i)
}

func nameAt(tr hcl.Traversal, i int) string {
	if i == 0 {
		return tr.RootName()
	}
	if i >= len(tr) {
		return ""
	}
	if a, ok := tr[i].(hcl.TraverseAttr); ok {
		return a.Name
	}
	return ""
}

func calleeDir(t *testing.T, m *module, call *hclsyntax.Block) string {
	t.Helper()
	src := literal(t, attr(t, call.Body, "source").Expr).AsString()
	require.True(t, strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../"),
		"%s: module %s: only local modules here, got %q", m.dir, call.Labels[0], src)
	return filepath.Join(m.dir, src)
}

// checkModuleCall: every argument is a variable of the called module, and
// every variable without a default is set.
func checkModuleCall(t *testing.T, m *module, call *hclsyntax.Block) {
	t.Helper()
	callee := load(t, calleeDir(t, m, call))
	for name := range call.Body.Attributes {
		if slices.Contains(metaArguments, name) {
			continue
		}
		if _, ok := callee.variables[name]; !ok {
			t.Errorf("%s: module %s: %s has no variable %q", m.dir, call.Labels[0], callee.dir, name)
		}
	}
	for name, v := range callee.variables {
		if _, hasDefault := v.Body.Attributes["default"]; hasDefault {
			continue
		}
		if _, set := call.Body.Attributes[name]; !set {
			t.Errorf("%s: module %s: required variable %q of %s is not set", m.dir, call.Labels[0], name, callee.dir)
		}
	}
}

// ---------------------------------------------------------------------------
// modules/queue

func TestQueueIsFIFOWithFIFODeadLetterQueue(t *testing.T) {
	m := load(t, "modules/queue")
	queue := m.resource(t, "aws_sqs_queue.this")
	dlq := m.resource(t, "aws_sqs_queue.dlq")

	// A FIFO queue can only redrive to a FIFO DLQ: both follow the same switch.
	for _, key := range []string{"fifo_queue", "deduplication_scope", "fifo_throughput_limit", "content_based_deduplication"} {
		require.Equal(t, m.text(attr(t, queue.Body, key).Expr), m.text(attr(t, dlq.Body, key).Expr),
			"queue and DLQ differ in %s", key)
	}
	require.Equal(t, "var.fifo_queue", m.text(attr(t, queue.Body, "fifo_queue").Expr))
	require.True(t, m.defaults(t)["fifo_queue"].True(), "FIFO is the default")

	// Names: the demo stack's exactly-demo.fifo and exactly-demo-dlq.fifo.
	l := m.evalLocals(m.withVars(t, map[string]cty.Value{"name": str("exactly-demo")}))
	require.Equal(t, "exactly-demo.fifo", l["queue_name"].AsString())
	require.Equal(t, "exactly-demo-dlq.fifo", l["dlq_name"].AsString())
	require.Equal(t, "local.queue_name", m.text(attr(t, queue.Body, "name").Expr))
	require.Equal(t, "local.dlq_name", m.text(attr(t, dlq.Body, "name").Expr))
	require.False(t, m.valid(t, "name", str("exactly-demo.fifo")), "the module adds .fifo itself")

	// High-throughput FIFO switch.
	for _, tc := range []struct {
		fifo, high   bool
		scope, limit string // "" means null
	}{
		{true, true, "messageGroup", "perMessageGroupId"},
		{true, false, "queue", "perQueue"},
		{false, true, "", ""},
	} {
		l := m.evalLocals(m.withVars(t, map[string]cty.Value{
			"name": str("q"), "fifo_queue": cty.BoolVal(tc.fifo), "high_throughput_fifo": cty.BoolVal(tc.high),
		}))
		for key, want := range map[string]string{"deduplication_scope": tc.scope, "fifo_throughput_limit": tc.limit} {
			got := l[key]
			if want == "" {
				require.True(t, got.IsNull(), "%s with fifo=%v high=%v", key, tc.fifo, tc.high)
			} else {
				require.Equal(t, want, got.AsString(), "%s with fifo=%v high=%v", key, tc.fifo, tc.high)
			}
		}
	}
	require.Equal(t, "local.deduplication_scope", m.text(attr(t, queue.Body, "deduplication_scope").Expr))
	require.Equal(t, "local.fifo_throughput_limit", m.text(attr(t, queue.Body, "fifo_throughput_limit").Expr))
}

func TestQueueRedrive(t *testing.T) {
	m := load(t, "modules/queue")

	redrive := objectKeys(t, jsonencodeArg(t, attr(t, m.resource(t, "aws_sqs_queue_redrive_policy.this").Body, "redrive_policy").Expr))
	require.Equal(t, "aws_sqs_queue.dlq[0].arn", m.text(redrive["deadLetterTargetArn"]))
	require.Equal(t, "var.max_receive_count", m.text(redrive["maxReceiveCount"]))
	require.Equal(t, "aws_sqs_queue.this.id", m.text(attr(t, m.resource(t, "aws_sqs_queue_redrive_policy.this").Body, "queue_url").Expr))
	require.EqualValues(t, 15, asInt(m.defaults(t)["max_receive_count"]))
	require.False(t, m.valid(t, "max_receive_count", num(0)))

	allow := m.resource(t, "aws_sqs_queue_redrive_allow_policy.dlq")
	require.Equal(t, "aws_sqs_queue.dlq[0].id", m.text(attr(t, allow.Body, "queue_url").Expr))
	policy := objectKeys(t, jsonencodeArg(t, attr(t, allow.Body, "redrive_allow_policy").Expr))
	require.Equal(t, "byQueue", literal(t, policy["redrivePermission"]).AsString())
	require.Equal(t, "[aws_sqs_queue.this.arn]", m.text(policy["sourceQueueArns"]))

	// The DLQ must keep a moved message at least as long as the queue would.
	dlq := m.resource(t, "aws_sqs_queue.dlq")
	vars := func(q, d int64) scope {
		return scope{"var": {"message_retention_seconds": num(q), "dlq_message_retention_seconds": num(d)}}
	}
	require.True(t, preconditions(t, dlq, vars(345600, 1209600)))
	require.False(t, preconditions(t, dlq, vars(345600, 345599)))
}

func TestQueueIsEncrypted(t *testing.T) {
	m := load(t, "modules/queue")
	for _, key := range []string{"aws_sqs_queue.this", "aws_sqs_queue.dlq"} {
		q := m.resource(t, key)
		require.Equal(t, "local.sqs_managed_sse_enabled", m.text(attr(t, q.Body, "sqs_managed_sse_enabled").Expr), key)
		require.Equal(t, "var.kms_master_key_id", m.text(attr(t, q.Body, "kms_master_key_id").Expr), key)
	}
	sse := m.evalLocals(m.withVars(t, map[string]cty.Value{"name": str("q")}))["sqs_managed_sse_enabled"]
	require.True(t, sse.True(), "SSE-SQS without a KMS key")
	sse = m.evalLocals(m.withVars(t, map[string]cty.Value{"name": str("q"), "kms_master_key_id": str("alias/k")}))["sqs_managed_sse_enabled"]
	require.True(t, sse.IsNull(), "SSE-KMS replaces SSE-SQS")
}

// ---------------------------------------------------------------------------
// modules/dedup-table

func TestDedupTableMatchesTheWorker(t *testing.T) {
	m := load(t, "modules/dedup-table")
	d := m.defaults(t)
	require.Equal(t, workerDedupTable, d["name"].AsString())
	require.Equal(t, workerLedgerTable, d["ledger_table_name"].AsString())
	require.Equal(t, workerTTLAttribute, d["ttl_attribute_name"].AsString())
	require.False(t, m.valid(t, "ttl_attribute_name", str("ttl")), "only the worker's TTL attribute is accepted")
	require.Equal(t, workerHashKey, m.evalLocals(d)["hash_key"].AsString())

	for _, key := range []string{"aws_dynamodb_table.this", "aws_dynamodb_table.ledger"} {
		tbl := m.resource(t, key)
		require.Equal(t, "PAY_PER_REQUEST", literal(t, attr(t, tbl.Body, "billing_mode").Expr).AsString(), key)
		require.Equal(t, "local.hash_key", m.text(attr(t, tbl.Body, "hash_key").Expr), key)
		require.Equal(t, "local.hash_key", m.text(attr(t, tbl.Body, "attribute", "name").Expr), key)
		require.Equal(t, "S", literal(t, attr(t, tbl.Body, "attribute", "type").Expr).AsString(), key)
		requireEncrypted(t, m, tbl)
		require.Equal(t, "var.point_in_time_recovery_enabled", m.text(attr(t, tbl.Body, "point_in_time_recovery", "enabled").Expr), key)
		require.Equal(t, "var.deletion_protection_enabled", m.text(attr(t, tbl.Body, "deletion_protection_enabled").Expr), key)
	}
	require.True(t, d["point_in_time_recovery_enabled"].True())
	require.True(t, d["deletion_protection_enabled"].True())

	dedup := m.resource(t, "aws_dynamodb_table.this")
	require.True(t, literal(t, attr(t, dedup.Body, "ttl", "enabled").Expr).True())
	require.Equal(t, "var.ttl_attribute_name", m.text(attr(t, dedup.Body, "ttl", "attribute_name").Expr))
	require.Equal(t, "var.name", m.text(attr(t, dedup.Body, "name").Expr))
	require.Equal(t, "var.ledger_table_name", m.text(attr(t, m.resource(t, "aws_dynamodb_table.ledger").Body, "name").Expr))
}

// ---------------------------------------------------------------------------
// IAM

// statements returns the actions of each statement of a policy document, by sid.
func statements(t *testing.T, m *module, doc *hclsyntax.Block) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(body *hclsyntax.Body) {
		sid := literal(t, attr(t, body, "sid").Expr).AsString()
		actions := stringList(t, literal(t, attr(t, body, "actions").Expr))
		for _, a := range actions {
			require.NotContains(t, a, "*", "%s: statement %s: wildcard action", m.dir, sid)
		}
		if _, ok := body.Attributes["not_actions"]; ok {
			t.Fatalf("%s: statement %s: not_actions grants everything else", m.dir, sid)
		}
		if e, ok := body.Attributes["effect"]; ok {
			require.Equal(t, "Allow", literal(t, e.Expr).AsString())
		}
		res := m.text(attr(t, body, "resources").Expr)
		require.NotContains(t, res, `"*"`, "%s: statement %s: all resources", m.dir, sid)
		out[sid] = actions
	}
	for _, b := range doc.Body.Blocks {
		switch {
		case b.Type == "statement":
			add(b.Body)
		case b.Type == "dynamic" && b.Labels[0] == "statement":
			add(nestedBlock(t, b.Body, "content").Body)
		}
	}
	return out
}

func TestWorkerECSTaskRoleIsLeastPrivilege(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	require.Equal(t, workerActions, statements(t, m, m.dataSource(t, "aws_iam_policy_document.task")))
	require.Equal(t, "data.aws_iam_policy_document.task.json", m.text(attr(t, m.resource(t, "aws_iam_role_policy.task").Body, "policy").Expr))
	require.Equal(t, "aws_iam_role.task.id", m.text(attr(t, m.resource(t, "aws_iam_role_policy.task").Body, "role").Expr))
	require.Equal(t, "aws_iam_role.task.arn", m.text(attr(t, m.resource(t, "aws_ecs_task_definition.this").Body, "task_role_arn").Expr))
	// Only policies this module writes: no managed policy on the task role.
	for key, r := range m.resources {
		if strings.HasPrefix(key, "aws_iam_role_policy_attachment.") {
			require.NotContains(t, m.text(attr(t, r.Body, "role").Expr), "aws_iam_role.task", key)
		}
	}
}

func TestWorkerLambdaRoleIsLeastPrivilege(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	// Tracing only with tracing_mode = "Active" (TestWorkerLambdaTracing).
	want := map[string][]string{"Logs": {"logs:CreateLogStream", "logs:PutLogEvents"}, "Tracing": xrayActions}
	for k, v := range workerActions {
		want[k] = v
	}
	require.Equal(t, want, statements(t, m, m.dataSource(t, "aws_iam_policy_document.this")))
	require.Equal(t, "data.aws_iam_policy_document.this.json", m.text(attr(t, m.resource(t, "aws_iam_role_policy.this").Body, "policy").Expr))
	require.Equal(t, "aws_iam_role.this.arn", m.text(attr(t, m.resource(t, "aws_lambda_function.this").Body, "role").Expr))
	for key := range m.resources {
		require.False(t, strings.HasPrefix(key, "aws_iam_role_policy_attachment."), "%s: managed policies grant more than the worker calls", key)
	}
}

// ---------------------------------------------------------------------------
// modules/worker-ecs

func TestWorkerECSSettings(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	var managed, passed []string
	for name := range objectKeys(t, m.locals["worker_settings"].Expr) {
		managed = append(managed, name)
		if name != "AWS_REGION" {
			passed = append(passed, name)
		}
	}
	require.ElementsMatch(t, managedSettings, passed, "the settings this module manages")

	vars := ecsVars(t, m, nil)
	l := m.evalLocals(vars)
	env := l["environment"].AsValueMap()
	shutdown, err := time.ParseDuration(env["WORKER_SHUTDOWN_TIMEOUT"].AsString())
	require.NoError(t, err)
	require.Equal(t, pool.DefaultShutdownTimeout, shutdown)
	require.Equal(t, cli.DefaultMetricsAddr, env["WORKER_METRICS_ADDR"].AsString())
	ttl, err := time.ParseDuration(env["WORKER_DEDUP_TTL"].AsString())
	require.NoError(t, err)
	require.Equal(t, cli.DefaultDedupTTL, ttl)
	require.Equal(t, cli.DefaultNamespace, env["WORKER_NAMESPACE"].AsString())
	// Passed explicitly, so that the role's sqs:SendMessage and the worker agree.
	require.Equal(t, "true", env["WORKER_MOVE_TO_DLQ"].AsString())
	require.Equal(t, "https://q/exactly-demo.fifo", env["WORKER_QUEUES"].AsString())
	require.Equal(t, workerDedupTable, env["WORKER_DEDUP_TABLE"].AsString())
	require.Equal(t, "eu-west-1", env["AWS_REGION"].AsString())
	require.NotContains(t, env, "WORKER_LEDGER_TABLE", "unset settings stay with the worker's defaults")
	require.Equal(t, []string{"exactly-demo.fifo"}, stringList(t, l["queue_names"]))
	require.Equal(t, "c", l["cluster_name"].AsString())

	// The extra environment cannot override a managed setting.
	for _, name := range managed {
		require.False(t, m.valid(t, "environment", cty.MapVal(map[string]cty.Value{name: str("x")})), name)
	}
	require.True(t, m.valid(t, "environment", cty.MapVal(map[string]cty.Value{"WORKER_LEASE": str("1m")})))
}

func TestWorkerECSStopsGracefully(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	td := m.resource(t, "aws_ecs_task_definition.this")
	containers, ok := jsonencodeArg(t, attr(t, td.Body, "container_definitions").Expr).(*hclsyntax.TupleConsExpr)
	require.True(t, ok)
	require.Len(t, containers.Exprs, 1)
	c := objectKeys(t, containers.Exprs[0])
	require.Equal(t, "var.stop_timeout", m.text(c["stopTimeout"]))
	require.Contains(t, m.text(c["environment"]), "local.environment")
	require.Equal(t, "awslogs", literal(t, objectKeys(t, c["logConfiguration"])["logDriver"]).AsString())
	require.Equal(t, []string{"FARGATE"}, stringList(t, literal(t, attr(t, td.Body, "requires_compatibilities").Expr)))

	d := m.defaults(t)
	require.Equal(t, workerShutdownSecs, asInt(d["shutdown_timeout_seconds"]))
	require.EqualValues(t, fargateMaxStopSecs, asInt(d["stop_timeout"]))
	require.False(t, m.valid(t, "stop_timeout", num(fargateMaxStopSecs+1)), "Fargate caps stopTimeout at 120 s")
	require.True(t, m.valid(t, "stop_timeout", num(fargateMaxStopSecs)))

	check := func(shutdown, stop int64) bool {
		return preconditions(t, td, scope{"var": {
			"shutdown_timeout_seconds": num(shutdown), "stop_timeout": num(stop),
			"effect": str("noop"), "ledger_table_name": nullString(), "ledger_table_arn": nullString(), "http_url": nullString(),
			"move_to_dlq": cty.False, "queues": cty.EmptyObjectVal, "environment": cty.EmptyObjectVal, "secrets": cty.EmptyObjectVal,
		}})
	}
	require.True(t, check(workerShutdownSecs, fargateMaxStopSecs))
	require.True(t, check(119, 120))
	require.False(t, check(120, 120), "the worker needs time after its shutdown timeout to flush")
	require.False(t, check(121, 120))

	svc := m.resource(t, "aws_ecs_service.this")
	require.Equal(t, "FARGATE", literal(t, attr(t, svc.Body, "launch_type").Expr).AsString())
	require.Equal(t, "aws_ecs_task_definition.this.arn", m.text(attr(t, svc.Body, "task_definition").Expr))
}

func TestWorkerECSScalesOnBacklogPerTask(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	p := m.resource(t, "aws_appautoscaling_policy.backlog")
	require.Equal(t, "TargetTrackingScaling", literal(t, attr(t, p.Body, "policy_type").Expr).AsString())
	spec := nestedBlock(t, nestedBlock(t, p.Body, "target_tracking_scaling_policy_configuration").Body, "customized_metric_specification")
	text := m.text(spec.Body)
	require.Contains(t, text, `"ApproximateNumberOfMessagesVisible"`)
	require.Contains(t, text, `"RunningTaskCount"`)
	require.Contains(t, text, "/ tasks")
	require.Equal(t, "var.autoscaling_target_backlog_per_task",
		m.text(attr(t, p.Body, "target_tracking_scaling_policy_configuration", "target_value").Expr))
	require.False(t, m.valid(t, "autoscaling_min_capacity", num(0)), "backlog per task is undefined at zero tasks")
}

// requireEncrypted evaluates a table's server_side_encryption block: one,
// enabled, with the module's key, by default; none only when
// manage_server_side_encryption is turned off (for DynamoDB Local).
func requireEncrypted(t *testing.T, m *module, tbl *hclsyntax.Block) {
	t.Helper()
	sse := func(vars map[string]cty.Value) []cty.Value {
		var keys []cty.Value
		eachDynamic(t, dynamicBlock(t, tbl.Body, "server_side_encryption"), scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
			require.True(t, literal(t, attr(t, content, "enabled").Expr).True())
			keys = append(keys, eval(t, attr(t, content, "kms_key_arn").Expr, inner))
		})
		return keys
	}
	require.True(t, m.defaults(t)["manage_server_side_encryption"].True(), "%s: SSE is written by default", m.dir)
	def := sse(m.defaults(t))
	require.Len(t, def, 1, "%s: one server_side_encryption block by default", m.dir)
	require.True(t, def[0].IsNull(), "%s: the AWS managed key by default", m.dir)
	const key = "arn:aws:kms:eu-west-1:123456789012:key/k"
	require.Equal(t, []cty.Value{str(key)}, sse(m.withVars(t, map[string]cty.Value{"server_side_encryption_kms_key_arn": str(key)})))
	require.Empty(t, sse(m.withVars(t, map[string]cty.Value{"manage_server_side_encryption": cty.False})))
}

// ---------------------------------------------------------------------------
// modules/worker-lambda

func TestWorkerLambdaEventSourceMapping(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	require.Equal(t, []string{"ReportBatchItemFailures"}, stringList(t, literal(t, attr(t, esm.Body, "function_response_types").Expr)))
	require.Equal(t, "var.batch_size", m.text(attr(t, esm.Body, "batch_size").Expr))
	require.Equal(t, "each.value.arn", m.text(attr(t, esm.Body, "event_source_arn").Expr))
	require.Equal(t, "var.maximum_batching_window_in_seconds", m.text(attr(t, esm.Body, "maximum_batching_window_in_seconds").Expr))

	// The defaults fit a FIFO queue: the examples' queues are FIFO.
	require.LessOrEqual(t, asInt(m.defaults(t)["batch_size"]), int64(fifoMaxBatchSize))
	require.Zero(t, asInt(m.defaults(t)["maximum_batching_window_in_seconds"]))
	require.False(t, m.valid(t, "maximum_concurrency", num(1)), "ESM maximum concurrency is at least 2")

	fn := m.resource(t, "aws_lambda_function.this")
	require.Equal(t, "provided.al2023", literal(t, attr(t, fn.Body, "runtime").Expr).AsString())
	require.Equal(t, "bootstrap", literal(t, attr(t, fn.Body, "handler").Expr).AsString())
	require.Equal(t, "[var.architecture]", m.text(attr(t, fn.Body, "architectures").Expr))
	require.Equal(t, "arm64", m.defaults(t)["architecture"].AsString())
	require.Equal(t, "local.environment", m.text(attr(t, fn.Body, "environment", "variables").Expr))
	var passed []string
	for name := range objectKeys(t, m.locals["worker_settings"].Expr) {
		passed = append(passed, name)
	}
	// No shutdown timeout or metrics server in Lambda; its metrics are
	// EMF lines, the binary's default there.
	require.ElementsMatch(t, slices.DeleteFunc(slices.Clone(managedSettings), func(s string) bool {
		return s == "WORKER_SHUTDOWN_TIMEOUT" || s == "WORKER_METRICS_ADDR" || s == "WORKER_METRICS_FORMAT"
	}), passed)
}

func TestWorkerLambdaVisibilityPrecondition(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	check := func(visibility, timeout int64) bool {
		return preconditions(t, esm, scope{
			"var": m.withVars(t, map[string]cty.Value{"timeout": num(timeout)}),
			"each": {"key": str("q"), "value": cty.ObjectVal(map[string]cty.Value{
				"arn": str(testQueueARN), "visibility_timeout_seconds": num(visibility), "max_receive_count": cty.NullVal(cty.Number),
			})},
		})
	}
	require.True(t, check(180, 30))
	require.False(t, check(179, 30), "visibility must be at least 6 x the function timeout")
	require.True(t, check(30, 5))
	require.False(t, check(30, 30))
	require.False(t, check(5399, 900))
}

// ---------------------------------------------------------------------------
// modules/alarms

func TestAlarms(t *testing.T) {
	m := load(t, "modules/alarms")
	dlq := m.resource(t, "aws_cloudwatch_metric_alarm.dlq_not_empty")
	require.Equal(t, "ApproximateNumberOfMessagesVisible", literal(t, attr(t, dlq.Body, "metric_name").Expr).AsString())
	require.Equal(t, "GreaterThanThreshold", literal(t, attr(t, dlq.Body, "comparison_operator").Expr).AsString())
	require.EqualValues(t, 0, asInt(literal(t, attr(t, dlq.Body, "threshold").Expr)))
	require.Equal(t, "var.dlq_name", m.text(objectKeys(t, attr(t, dlq.Body, "dimensions").Expr)["QueueName"]))

	age := m.resource(t, "aws_cloudwatch_metric_alarm.oldest_message_age")
	require.Equal(t, "ApproximateAgeOfOldestMessage", literal(t, attr(t, age.Body, "metric_name").Expr).AsString())
	require.Equal(t, "var.queue_name", m.text(objectKeys(t, attr(t, age.Body, "dimensions").Expr)["QueueName"]))
	require.Equal(t, "var.oldest_message_age_threshold_seconds", m.text(attr(t, age.Body, "threshold").Expr))
}

// ---------------------------------------------------------------------------
// examples

func TestExampleLambdaMeetsTheVisibilityRule(t *testing.T) {
	m := load(t, "examples/lambda")
	vars := m.defaults(t)
	s := scope{"var": vars}
	visibility := eval(t, attr(t, m.call(t, "queue").Body, "visibility_timeout_seconds").Expr, s)
	timeout := eval(t, attr(t, m.call(t, "worker").Body, "timeout").Expr, s)
	require.GreaterOrEqual(t, asInt(visibility), 6*asInt(timeout))
	require.LessOrEqual(t, asInt(eval(t, attr(t, m.call(t, "worker").Body, "batch_size").Expr, s)), int64(fifoMaxBatchSize))

	l := m.evalLocals(vars)
	require.Equal(t, "dist/worker-lambda-arm64.zip", strings.TrimPrefix(filepath.ToSlash(filepath.Clean(l["package_path"].AsString())), "../../"))
}

func TestExamplesUseTheDemoNames(t *testing.T) {
	for _, dir := range []string{"examples/ecs", "examples/lambda"} {
		m := load(t, dir)
		name := eval(t, attr(t, m.call(t, "queue").Body, "name").Expr, scope{"var": m.defaults(t)})
		require.Equal(t, "exactly-demo", name.AsString(), dir)
		require.Equal(t, map[string]int64{"examples/ecs": 5, "examples/lambda": 15}[dir], asInt(literal(t, attr(t, m.call(t, "queue").Body, "max_receive_count").Expr)), dir)
		require.Equal(t, "module.queue.worker_queue", m.text(objectKeys(t, attr(t, m.call(t, "worker").Body, "queues").Expr)["demo"]), dir)
		require.Equal(t, "module.dedup_table.table_arn", m.text(attr(t, m.call(t, "worker").Body, "dedup_table_arn").Expr), dir)
		require.Equal(t, "ledger", literal(t, attr(t, m.call(t, "worker").Body, "effect").Expr).AsString(), dir)
		require.True(t, literal(t, attr(t, m.call(t, "dedup_table").Body, "create_ledger_table").Expr).True(), dir)
		require.Len(t, m.providers, 1, dir)
	}
	m := load(t, "examples/ecs")
	require.EqualValues(t, 30, asInt(literal(t, attr(t, m.call(t, "queue").Body, "visibility_timeout_seconds").Expr)))
	cluster := m.resource(t, "aws_ecs_cluster.this")
	require.Equal(t, "enabled", literal(t, attr(t, cluster.Body, "setting", "value").Expr).AsString(),
		"backlog-per-task autoscaling needs Container Insights")
}

// ---------------------------------------------------------------------------
// localstack/terraform/localstack_override.tf

// endpointFor maps resource type prefixes to the provider's endpoint names.
// The longest matching prefix wins.
var endpointFor = map[string]string{
	"aws_appautoscaling_":         "appautoscaling",
	"aws_caller_identity":         "sts",
	"aws_cloudwatch_event_":       "events",
	"aws_cloudwatch_log_":         "logs",
	"aws_cloudwatch_metric_alarm": "cloudwatch",
	"aws_dynamodb_":               "dynamodb",
	"aws_ecs_":                    "ecs",
	"aws_iam_":                    "iam",
	"aws_iam_policy_document":     "", // rendered by the provider, no API call
	"aws_lambda_":                 "lambda",
	"aws_sns_":                    "sns",
	"aws_sqs_":                    "sqs",
}

func TestLocalStackOverrideCoversEveryService(t *testing.T) {
	const path = "../../localstack/terraform/localstack_override.tf"
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	require.False(t, diags.HasErrors(), diags.Error())
	body := f.Body.(*hclsyntax.Body)
	require.Len(t, body.Blocks, 1)
	provider := body.Blocks[0]
	require.Equal(t, []string{"aws"}, provider.Labels)
	for _, skip := range []string{"skip_credentials_validation", "skip_requesting_account_id", "skip_metadata_api_check"} {
		require.True(t, literal(t, attr(t, provider.Body, skip).Expr).True(), skip)
	}

	// The override sits in each example's directory; it must not depend on it.
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for name, a := range b.Attributes {
			require.Empty(t, a.Expr.Variables(), "%s: %s: the override takes literals only", path, name)
		}
		for _, nb := range b.Blocks {
			walk(nb.Body)
		}
	}
	walk(provider.Body)

	endpoints := map[string]string{}
	for name, a := range nestedBlock(t, provider.Body, "endpoints").Body.Attributes {
		endpoints[name] = literal(t, a.Expr).AsString()
		require.Equal(t, "http://127.0.0.1:4566", endpoints[name], name)
	}
	require.Contains(t, endpoints, "sts", "the provider calls STS")

	for _, dir := range moduleDirs(t) {
		m := load(t, dir)
		types := map[string]bool{}
		for key := range m.resources {
			types[strings.Split(key, ".")[0]] = true
		}
		for key := range m.data {
			types[strings.Split(key, ".")[0]] = true
		}
		for typ := range types {
			var service string
			var found bool
			best := ""
			for prefix, s := range endpointFor {
				if strings.HasPrefix(typ, prefix) && len(prefix) > len(best) {
					best, service, found = prefix, s, true
				}
			}
			require.True(t, found, "%s: no endpoint known for %s; add it to endpointFor and the override", dir, typ)
			if service != "" {
				require.Contains(t, endpoints, service, "%s uses %s", dir, typ)
			}
		}
	}
}

// TestRequiredVersionAdmitsTheCheckedTerraform: fmt runs with Terraform 1.5.7.
func TestRequiredVersionAdmitsTheCheckedTerraform(t *testing.T) {
	for _, dir := range moduleDirs(t) {
		m := load(t, dir)
		var found bool
		for _, body := range m.bodies {
			for _, b := range body.Blocks {
				if b.Type != "terraform" {
					continue
				}
				found = true
				require.Equal(t, ">= 1.5.0", literal(t, attr(t, b.Body, "required_version").Expr).AsString(), dir)
				aws := objectKeys(t, attr(t, b.Body, "required_providers", "aws").Expr)
				require.Equal(t, "hashicorp/aws", literal(t, aws["source"]).AsString(), dir)
			}
		}
		require.True(t, found, "%s: no terraform block", dir)
	}
}

// TestDeadLetterSendOnlyWithMoveToDLQ: sqs:SendMessage is granted only when
// the worker is told to move messages to the DLQ, and only if every queue has one.
func TestDeadLetterSendOnlyWithMoveToDLQ(t *testing.T) {
	for _, tc := range []struct{ dir, doc, guarded string }{
		{"modules/worker-ecs", "aws_iam_policy_document.task", "aws_ecs_task_definition.this"},
		{"modules/worker-lambda", "aws_iam_policy_document.this", "aws_lambda_function.this"},
	} {
		m := load(t, tc.dir)
		var forEach string
		for _, b := range m.dataSource(t, tc.doc).Body.Blocks {
			if b.Type == "dynamic" && m.text(attr(t, nestedBlock(t, b.Body, "content").Body, "sid").Expr) == `"DeadLetter"` {
				forEach = m.text(attr(t, b.Body, "for_each").Expr)
			}
		}
		require.Equal(t, "var.move_to_dlq ? [local.dlq_arns] : []", forEach, tc.dir)

		queue := func(dlq cty.Value) cty.Value {
			return cty.ObjectVal(map[string]cty.Value{"a": cty.ObjectVal(map[string]cty.Value{"dlq_arn": dlq})})
		}
		check := func(move bool, queues cty.Value) bool {
			return preconditions(t, m.resource(t, tc.guarded), scope{"var": {
				"move_to_dlq": cty.BoolVal(move), "queues": queues, "effect": str("noop"),
				"ledger_table_name": nullString(), "ledger_table_arn": nullString(), "http_url": nullString(),
				"shutdown_timeout_seconds": num(workerShutdownSecs), "stop_timeout": num(fargateMaxStopSecs),
				"environment": cty.EmptyObjectVal, "secrets": cty.EmptyObjectVal,
			}})
		}
		require.True(t, check(false, queue(nullString())), tc.dir)
		require.True(t, check(true, queue(str("arn:aws:sqs:us-east-1:123456789012:q-dlq.fifo"))), tc.dir)
		require.False(t, check(true, queue(nullString())), "%s: move_to_dlq without a DLQ", tc.dir)
	}
}

// TestModuleREADMEsDocumentEveryVariableAndOutput keeps the READMEs' tables in step.
func TestModuleREADMEsDocumentEveryVariableAndOutput(t *testing.T) {
	dirs, err := filepath.Glob("modules/*")
	require.NoError(t, err)
	for _, dir := range dirs {
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		require.NoError(t, err, "%s has no README.md", dir)
		m := load(t, dir)
		for name := range m.variables {
			require.Contains(t, string(readme), "| `"+name+"` |", "%s/README.md does not list variable %s", dir, name)
		}
		for name := range m.outputs {
			require.Contains(t, string(readme), "| `"+name+"` |", "%s/README.md does not list output %s", dir, name)
		}
	}
}

// ---------------------------------------------------------------------------
// Custom effects: any effect name, extra environment, secrets, statements

// ecsVars are a complete set of worker-ecs variables, with overrides.
func ecsVars(t *testing.T, m *module, extra map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	vars := map[string]cty.Value{
		"cluster_arn": str("arn:aws:ecs:eu-west-1:123456789012:cluster/c"), "container_image": str("img"),
		"subnet_ids": cty.ListVal([]cty.Value{str("s")}), "security_group_ids": cty.ListVal([]cty.Value{str("g")}),
		"dedup_table_arn": str("arn:aws:dynamodb:eu-west-1:123456789012:table/exactly-dedup"), "effect": str("noop"),
		"queues": cty.MapVal(map[string]cty.Value{"a": cty.ObjectVal(map[string]cty.Value{
			"arn": str("arn:aws:sqs:eu-west-1:123456789012:exactly-demo.fifo"), "url": str("https://q/exactly-demo.fifo"),
			"visibility_timeout_seconds": cty.NullVal(cty.Number), "dlq_arn": nullString(),
		})}),
	}
	for k, v := range extra {
		vars[k] = v
	}
	return m.withVars(t, vars)
}

// lambdaVars are a complete set of worker-lambda variables, with overrides.
func lambdaVars(t *testing.T, m *module, extra map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	vars := map[string]cty.Value{
		"package_path":    str("dist/worker-lambda-arm64.zip"),
		"dedup_table_arn": str("arn:aws:dynamodb:eu-west-1:123456789012:table/exactly-dedup"), "effect": str("noop"),
		"queues": cty.MapVal(map[string]cty.Value{"a": cty.ObjectVal(map[string]cty.Value{
			"arn": str("arn:aws:sqs:eu-west-1:123456789012:exactly-demo.fifo"), "url": str("https://q/exactly-demo.fifo"),
			"visibility_timeout_seconds": num(180), "dlq_arn": nullString(),
		})}),
	}
	for k, v := range extra {
		vars[k] = v
	}
	return m.withVars(t, vars)
}

func strMap(kv ...string) cty.Value {
	m := map[string]cty.Value{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = str(kv[i+1])
	}
	if len(m) == 0 {
		return cty.MapValEmpty(cty.String)
	}
	return cty.MapVal(m)
}

func strList(items ...string) cty.Value {
	if len(items) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	var vs []cty.Value
	for _, i := range items {
		vs = append(vs, str(i))
	}
	return cty.ListVal(vs)
}

// iamPolicy is a policy document as jsonencode writes it.
type iamPolicy struct {
	Version   string
	Statement []struct {
		Sid       string
		Effect    string
		Action    []string
		Resource  []string
		Condition map[string]map[string][]string
	}
}

// rolePolicy evaluates an aws_iam_role_policy: how many (its count), the
// role it attaches to, and the policy it would write.
func rolePolicy(t *testing.T, m *module, key string, vars map[string]cty.Value) (count int64, role string, policy iamPolicy) {
	t.Helper()
	r := m.resource(t, key)
	s := scope{"var": vars, "local": m.evalLocals(vars)}
	count = asInt(eval(t, attr(t, r.Body, "count").Expr, s))
	role = m.text(attr(t, r.Body, "role").Expr)
	if count > 0 {
		doc := eval(t, attr(t, r.Body, "policy").Expr, s)
		require.NoError(t, json.Unmarshal([]byte(doc.AsString()), &policy), doc.AsString())
		require.Equal(t, "2012-10-17", policy.Version)
	}
	return count, role, policy
}

const (
	testParameterARN = "arn:aws:ssm:eu-west-1:123456789012:parameter/email/api-token"
	testSecretARN    = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:email/db-AbCdEf"
	testKeyARN       = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
)

// TestWorkerModulesAcceptAnyEffectName: a binary of one's own registers its
// effects, so the modules take any name; ledger and http keep the settings
// they need.
func TestWorkerModulesAcceptAnyEffectName(t *testing.T) {
	for _, tc := range []struct{ dir, guarded string }{
		{"modules/worker-ecs", "aws_ecs_task_definition.this"},
		{"modules/worker-lambda", "aws_lambda_function.this"},
	} {
		m := load(t, tc.dir)
		for _, name := range []string{"email", "ledger", "http", "noop", "send-sms.v2"} {
			require.True(t, m.valid(t, "effect", str(name)), "%s: effect %q", tc.dir, name)
		}
		for _, name := range []string{"", " ", "send email", "email\n"} {
			require.False(t, m.valid(t, "effect", str(name)), "%s: effect %q", tc.dir, name)
		}
		check := func(effect string, ledger, url cty.Value) bool {
			return preconditions(t, m.resource(t, tc.guarded), scope{"var": {
				"effect": str(effect), "ledger_table_name": ledger, "ledger_table_arn": ledger, "http_url": url,
				"move_to_dlq": cty.False, "queues": cty.EmptyObjectVal, "environment": cty.EmptyObjectVal, "secrets": cty.EmptyObjectVal,
				"shutdown_timeout_seconds": num(workerShutdownSecs), "stop_timeout": num(fargateMaxStopSecs),
			}})
		}
		require.True(t, check("email", nullString(), nullString()), "%s: a custom effect needs neither a ledger table nor a URL", tc.dir)
		require.False(t, check("ledger", nullString(), nullString()), "%s: ledger without its table", tc.dir)
		require.True(t, check("ledger", str("t"), nullString()), tc.dir)
		require.False(t, check("http", nullString(), nullString()), "%s: http without its URL", tc.dir)
		require.True(t, check("http", nullString(), str("https://h")), tc.dir)

		env := m.evalLocals(m.withVars(t, map[string]cty.Value{"effect": str("email"), "queues": cty.MapVal(map[string]cty.Value{
			"a": cty.ObjectVal(map[string]cty.Value{"arn": str("arn:aws:sqs:eu-west-1:123456789012:q"), "url": str("https://q/q"),
				"visibility_timeout_seconds": num(180), "dlq_arn": nullString()}),
		})}))["environment"].AsValueMap()
		require.Equal(t, "email", env["WORKER_EFFECT"].AsString(), tc.dir)
	}
}

// TestWorkerECSPassesEnvironmentAndSecretsToTheContainer evaluates the
// container definition itself: the extra environment and the secrets (as
// valueFrom references, never values) reach the container.
func TestWorkerECSPassesEnvironmentAndSecretsToTheContainer(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	td := m.resource(t, "aws_ecs_task_definition.this")
	container := func(vars map[string]cty.Value) map[string]any {
		s := scope{"var": vars, "local": m.evalLocals(vars), "aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"name": str("/ecs/w")})}}
		var defs []map[string]any
		require.NoError(t, json.Unmarshal([]byte(eval(t, attr(t, td.Body, "container_definitions").Expr, s).AsString()), &defs))
		require.Len(t, defs, 1)
		return defs[0]
	}
	env := func(c map[string]any) map[string]string {
		out := map[string]string{}
		for _, e := range c["environment"].([]any) {
			kv := e.(map[string]any)
			out[kv["name"].(string)] = kv["value"].(string)
		}
		return out
	}

	c := container(ecsVars(t, m, map[string]cty.Value{
		"effect":      str("email"),
		"environment": strMap("EMAIL_FROM", "orders@example.com", "WORKER_LEASE", "2m"),
		"secrets":     strMap("EMAIL_API_TOKEN", testParameterARN, "DB_PASSWORD", testSecretARN+":password::"),
	}))
	e := env(c)
	hc := c["healthCheck"].(map[string]any)
	require.Equal(t, []any{"CMD", "/worker", "healthcheck"}, hc["command"], "the image has no shell: the worker checks itself")
	require.Contains(t, e, "WORKER_METRICS_ADDR", "where the health check asks")
	require.Equal(t, "orders@example.com", e["EMAIL_FROM"])
	require.Equal(t, "2m", e["WORKER_LEASE"])
	require.Equal(t, "email", e["WORKER_EFFECT"])
	require.NotContains(t, e, "EMAIL_API_TOKEN", "a secret is no plain variable")
	require.Equal(t, []any{
		map[string]any{"name": "DB_PASSWORD", "valueFrom": testSecretARN + ":password::"},
		map[string]any{"name": "EMAIL_API_TOKEN", "valueFrom": testParameterARN},
	}, c["secrets"])

	// Without secrets, no secrets key at all.
	c = container(ecsVars(t, m, nil))
	require.Nil(t, c["secrets"])
	require.NotContains(t, env(c), "EMAIL_FROM")

	// A secret name cannot shadow a managed setting, or a plain variable.
	require.False(t, m.valid(t, "secrets", strMap("WORKER_EFFECT", testParameterARN)))
	require.False(t, m.valid(t, "secrets", strMap("AWS_REGION", testParameterARN)))
	require.False(t, m.valid(t, "secrets", strMap("BAD NAME", testParameterARN)))
	require.False(t, m.valid(t, "secrets", strMap("TOKEN", "email/api-token")), "a full ARN: the grant names it")
	require.False(t, m.valid(t, "secrets", strMap("TOKEN", "arn:aws:s3:::bucket/key")))
	require.True(t, m.valid(t, "secrets", strMap("TOKEN", testSecretARN)))
	require.True(t, m.valid(t, "secrets", strMap("TOKEN", testSecretARN+":password:AWSCURRENT:")))
	guard := func(env cty.Value) bool {
		return preconditions(t, td, scope{"var": ecsVars(t, m, map[string]cty.Value{
			"environment": env, "secrets": strMap("TOKEN", testParameterARN), "move_to_dlq": cty.False,
		})})
	}
	require.True(t, guard(strMap("OTHER", "x")))
	require.False(t, guard(strMap("TOKEN", "x")), "TOKEN both plain and secret")
}

// TestWorkerECSSecretsAreLeastPrivilege: the execution role (which ECS uses
// to read secrets at task start) gets read on exactly the given ARNs, and
// kms:Decrypt on exactly the given keys through those services; the task
// role (the worker's own identity) gets nothing of it.
func TestWorkerECSSecretsAreLeastPrivilege(t *testing.T) {
	m := load(t, "modules/worker-ecs")
	n, role, p := rolePolicy(t, m, "aws_iam_role_policy.execution_secrets", ecsVars(t, m, map[string]cty.Value{
		"secrets": strMap(
			"EMAIL_API_TOKEN", testParameterARN,
			"DB_PASSWORD", testSecretARN+":password::",
			"DB_USER", testSecretARN+":username::",
		),
		"secrets_kms_key_arns": strList(testKeyARN),
	}))
	require.EqualValues(t, 1, n)
	require.Equal(t, "aws_iam_role.execution.id", role)
	require.Len(t, p.Statement, 3)
	got := map[string][2][]string{}
	for _, st := range p.Statement {
		require.Equal(t, "Allow", st.Effect)
		got[st.Sid] = [2][]string{st.Action, st.Resource}
		if st.Sid == "DecryptSecrets" {
			require.ElementsMatch(t, []string{"ssm.eu-west-1.amazonaws.com", "secretsmanager.eu-west-1.amazonaws.com"},
				st.Condition["StringEquals"]["kms:ViaService"], "the keys only through SSM and Secrets Manager")
		}
	}
	require.Equal(t, map[string][2][]string{
		"ReadParameters": {{"ssm:GetParameters"}, {testParameterARN}},
		"ReadSecrets":    {{"secretsmanager:GetSecretValue"}, {testSecretARN}},
		"DecryptSecrets": {{"kms:Decrypt"}, {testKeyARN}},
	}, got, "the secret's own ARN (no json key), once")

	// Parameters only, no customer managed key: one statement.
	_, _, p = rolePolicy(t, m, "aws_iam_role_policy.execution_secrets", ecsVars(t, m, map[string]cty.Value{
		"secrets": strMap("EMAIL_API_TOKEN", testParameterARN),
	}))
	require.Len(t, p.Statement, 1)
	require.Equal(t, []string{"ssm:GetParameters"}, p.Statement[0].Action)

	// No secrets: no policy, whatever keys are listed.
	n, _, _ = rolePolicy(t, m, "aws_iam_role_policy.execution_secrets", ecsVars(t, m, map[string]cty.Value{"secrets_kms_key_arns": strList(testKeyARN)}))
	require.Zero(t, n)

	// The task role's own document has no secrets statement (the worker's
	// least-privilege test compares it statement by statement).
	require.NotContains(t, statements(t, m, m.dataSource(t, "aws_iam_policy_document.task")), "ReadSecrets")
	require.Contains(t, m.text(attr(t, m.resource(t, "aws_ecs_service.this").Body, "depends_on").Expr), "aws_iam_role_policy.execution_secrets",
		"tasks start once they may read their secrets")
}

// TestWorkerModulesAttachExtraStatements: what a custom effect calls goes
// into a policy of its own on the role the effect runs as.
func TestWorkerModulesAttachExtraStatements(t *testing.T) {
	statementsVar := cty.MapVal(map[string]cty.Value{
		"SendEmail": cty.ObjectVal(map[string]cty.Value{
			"actions":   strList("ses:SendRawEmail", "ses:SendEmail"),
			"resources": strList("arn:aws:ses:eu-west-1:123456789012:identity/example.com"),
		}),
		"Publish": cty.ObjectVal(map[string]cty.Value{
			"actions":   strList("sns:Publish"),
			"resources": strList("arn:aws:sns:eu-west-1:123456789012:sent"),
		}),
	})
	for _, tc := range []struct {
		dir, role string
		vars      func(*testing.T, *module, map[string]cty.Value) map[string]cty.Value
	}{
		{"modules/worker-ecs", "aws_iam_role.task.id", ecsVars},
		{"modules/worker-lambda", "aws_iam_role.this.id", lambdaVars},
	} {
		m := load(t, tc.dir)
		n, role, p := rolePolicy(t, m, "aws_iam_role_policy.effect", tc.vars(t, m, map[string]cty.Value{"policy_statements": statementsVar}))
		require.EqualValues(t, 1, n, tc.dir)
		require.Equal(t, tc.role, role, "%s: on the role the effect runs as", tc.dir)
		require.Len(t, p.Statement, 2, tc.dir)
		require.Equal(t, "Publish", p.Statement[0].Sid)
		require.Equal(t, []string{"sns:Publish"}, p.Statement[0].Action)
		require.Equal(t, []string{"arn:aws:sns:eu-west-1:123456789012:sent"}, p.Statement[0].Resource)
		require.Equal(t, "SendEmail", p.Statement[1].Sid)
		require.Equal(t, "Allow", p.Statement[1].Effect)
		require.Equal(t, []string{"ses:SendEmail", "ses:SendRawEmail"}, p.Statement[1].Action)
		require.Equal(t, []string{"arn:aws:ses:eu-west-1:123456789012:identity/example.com"}, p.Statement[1].Resource)

		n, _, _ = rolePolicy(t, m, "aws_iam_role_policy.effect", tc.vars(t, m, nil))
		require.Zero(t, n, "%s: no statements, no policy", tc.dir)

		stmt := func(sid string, actions, resources cty.Value) cty.Value {
			return cty.MapVal(map[string]cty.Value{sid: cty.ObjectVal(map[string]cty.Value{"actions": actions, "resources": resources})})
		}
		res := strList("arn:aws:sns:eu-west-1:123456789012:sent")
		require.True(t, m.valid(t, "policy_statements", stmt("Publish", strList("sns:Publish"), res)), tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("Publish", strList("sns:*"), res)), "%s: wildcard action", tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("Publish", strList("*"), res)), "%s: every action", tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("Publish", strList("sns:Publish"), strList("*"))), "%s: every resource", tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("Publish", strList(), res)), "%s: no action", tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("Publish", strList("sns:Publish"), strList())), "%s: no resource", tc.dir)
		require.False(t, m.valid(t, "policy_statements", stmt("send-email", strList("sns:Publish"), res)), "%s: a Sid is letters and digits", tc.dir)
	}
	// Lambda starts once its effect may make its calls.
	m := load(t, "modules/worker-lambda")
	require.Contains(t, m.text(attr(t, m.resource(t, "aws_lambda_function.this").Body, "depends_on").Expr), "aws_iam_role_policy.effect")
	m = load(t, "modules/worker-ecs")
	require.Contains(t, m.text(attr(t, m.resource(t, "aws_ecs_service.this").Body, "depends_on").Expr), "aws_iam_role_policy.effect")
}

// TestWorkerLambdaPassesEnvironmentAndSecretARNs: Lambda cannot inject
// secrets, so the function gets <NAME>_ARN and its role may read exactly
// those ARNs (through SSM or Secrets Manager with the given keys).
func TestWorkerLambdaPassesEnvironmentAndSecretARNs(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	vars := lambdaVars(t, m, map[string]cty.Value{
		"effect":               str("email"),
		"environment":          strMap("EMAIL_FROM", "orders@example.com"),
		"secrets":              strMap("EMAIL_API_TOKEN", testParameterARN, "DB_PASSWORD", testSecretARN),
		"secrets_kms_key_arns": strList(testKeyARN),
	})
	env := m.evalLocals(vars)["environment"].AsValueMap()
	require.Equal(t, "orders@example.com", env["EMAIL_FROM"].AsString())
	require.Equal(t, testParameterARN, env["EMAIL_API_TOKEN_ARN"].AsString())
	require.Equal(t, testSecretARN, env["DB_PASSWORD_ARN"].AsString())
	require.NotContains(t, env, "EMAIL_API_TOKEN", "the value is read by the effect, never put in the configuration")
	require.Equal(t, "email", env["WORKER_EFFECT"].AsString())
	require.Equal(t, "local.environment", m.text(attr(t, m.resource(t, "aws_lambda_function.this").Body, "environment", "variables").Expr))

	n, role, p := rolePolicy(t, m, "aws_iam_role_policy.effect", vars)
	require.EqualValues(t, 1, n)
	require.Equal(t, "aws_iam_role.this.id", role)
	got := map[string][2][]string{}
	for _, st := range p.Statement {
		got[st.Sid] = [2][]string{st.Action, st.Resource}
		if st.Sid == "DecryptSecrets" {
			require.ElementsMatch(t, []string{"ssm.eu-west-1.amazonaws.com", "secretsmanager.eu-west-1.amazonaws.com"}, st.Condition["StringEquals"]["kms:ViaService"])
		}
	}
	require.Equal(t, map[string][2][]string{
		"ReadParameters": {{"ssm:GetParameter"}, {testParameterARN}},
		"ReadSecrets":    {{"secretsmanager:GetSecretValue"}, {testSecretARN}},
		"DecryptSecrets": {{"kms:Decrypt"}, {testKeyARN}},
	}, got)

	require.False(t, m.valid(t, "secrets", strMap("WORKER_X", testParameterARN)))
	require.False(t, m.valid(t, "secrets", strMap("TOKEN", "email/api-token")))
	guard := func(env cty.Value) bool {
		return preconditions(t, m.resource(t, "aws_lambda_function.this"), scope{"var": lambdaVars(t, m, map[string]cty.Value{
			"environment": env, "secrets": strMap("TOKEN", testParameterARN), "move_to_dlq": cty.False,
		})})
	}
	require.True(t, guard(strMap("TOKEN", "x")))
	require.False(t, guard(strMap("TOKEN_ARN", "x")), "TOKEN_ARN both plain and a secret's")
}

// ---------------------------------------------------------------------------
// examples/custom-effect/terraform

// TestCustomEffectExampleDeploysItsEffect: the example root runs the effect
// main.go registers, gives it every setting newSendEmail reads (as a plain
// variable or a secret), and, evaluated through the worker-ecs module, the
// container gets them and the execution role may read the token's parameter.
func TestCustomEffectExampleDeploysItsEffect(t *testing.T) {
	m := load(t, customEffectRoot)
	src, err := os.ReadFile(filepath.Join(customEffectRoot, "..", "main.go"))
	require.NoError(t, err)
	registered := regexp.MustCompile(`worker\.Effects\{"([^"]+)"`).FindAllStringSubmatch(string(src), -1)
	require.Len(t, registered, 1)
	var reads []string
	for _, match := range regexp.MustCompile(`env\.Lookup\("([A-Z0-9_]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		reads = append(reads, match[1])
	}
	require.NotEmpty(t, reads)

	call := m.call(t, "worker")
	require.Equal(t, "../../../infra/terraform/modules/worker-ecs", literal(t, attr(t, call.Body, "source").Expr).AsString())
	require.Equal(t, registered[0][1], literal(t, attr(t, call.Body, "effect").Expr).AsString(), "the effect main.go gives worker.Main")
	require.Equal(t, "var.container_image", m.text(attr(t, call.Body, "container_image").Expr))
	require.Contains(t, m.variables["container_image"].Body.Attributes["description"].Expr.(*hclsyntax.TemplateExpr).Parts[0].(*hclsyntax.LiteralValueExpr).Val.AsString(),
		"make image MAIN=./examples/custom-effect")

	// The example's inputs, from terraform.tfvars.example: each passes its validations.
	tfvars, err := os.ReadFile(filepath.Join(customEffectRoot, "terraform.tfvars.example"))
	require.NoError(t, err)
	f, diags := hclsyntax.ParseConfig(tfvars, "terraform.tfvars.example", hcl.InitialPos)
	require.False(t, diags.HasErrors(), diags.Error())
	given := map[string]cty.Value{}
	for name, a := range f.Body.(*hclsyntax.Body).Attributes {
		given[name] = literal(t, a.Expr)
		require.True(t, m.valid(t, name, given[name]), "terraform.tfvars.example: %s", name)
	}
	for name, v := range m.variables {
		if _, hasDefault := v.Body.Attributes["default"]; !hasDefault {
			require.Contains(t, given, name, "terraform.tfvars.example sets every required variable")
		}
	}
	vars := m.withVars(t, given)
	s := scope{"var": vars}
	environment := eval(t, attr(t, call.Body, "environment").Expr, s)
	secrets := eval(t, attr(t, call.Body, "secrets").Expr, s)
	for _, name := range reads {
		inEnv, inSecrets := environment.Type().HasAttribute(name), secrets.Type().HasAttribute(name)
		require.NotEqual(t, inEnv, inSecrets, "%s, which newSendEmail reads, must be set once: environment or secrets", name)
	}
	require.True(t, secrets.Type().HasAttribute("EMAIL_API_TOKEN"), "the token is a secret")
	require.Equal(t, "var.policy_statements", m.text(attr(t, call.Body, "policy_statements").Expr))

	// Through the module: the container and the execution role.
	ecs := load(t, "modules/worker-ecs")
	toMap := func(v cty.Value) cty.Value {
		out := map[string]cty.Value{}
		for k, e := range v.AsValueMap() {
			out[k] = e
		}
		return cty.MapVal(out)
	}
	modVars := ecsVars(t, ecs, map[string]cty.Value{
		"effect": str(registered[0][1]), "environment": toMap(environment), "secrets": toMap(secrets),
		"secrets_kms_key_arns": eval(t, attr(t, call.Body, "secrets_kms_key_arns").Expr, s),
	})
	local := ecs.evalLocals(modVars)
	var defs []map[string]any
	ctx := scope{"var": modVars, "local": local, "aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"name": str("/ecs/w")})}}
	require.NoError(t, json.Unmarshal([]byte(eval(t, attr(t, ecs.resource(t, "aws_ecs_task_definition.this").Body, "container_definitions").Expr, ctx).AsString()), &defs))
	require.Contains(t, defs[0]["environment"], map[string]any{"name": "EMAIL_API_URL", "value": given["email_api_url"].AsString()})
	require.Contains(t, defs[0]["environment"], map[string]any{"name": "WORKER_EFFECT", "value": "email"})
	require.Equal(t, []any{map[string]any{"name": "EMAIL_API_TOKEN", "valueFrom": given["email_api_token_parameter_arn"].AsString()}}, defs[0]["secrets"])
	n, _, p := rolePolicy(t, ecs, "aws_iam_role_policy.execution_secrets", modVars)
	require.EqualValues(t, 1, n)
	require.Len(t, p.Statement, 1)
	require.Equal(t, []string{"ssm:GetParameters"}, p.Statement[0].Action)
	require.Equal(t, []string{given["email_api_token_parameter_arn"].AsString()}, p.Statement[0].Resource)
}
