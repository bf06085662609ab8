package terraform_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// ---------------------------------------------------------------------------
// Policy documents, evaluated

// docStatement is one statement of an aws_iam_policy_document, evaluated.
type docStatement struct {
	Sid, Effect        string
	Actions, Resources []string
	Principals         map[string][]string // type -> identifiers
	Conditions         map[string][]string // "test variable" -> values
	raw                map[string]*hclsyntax.Attribute
}

// policyStatements evaluates the statements of an aws_iam_policy_document
// block, static and dynamic, in scope s (a dynamic block's iterator is added).
func policyStatements(t *testing.T, doc *hclsyntax.Block, s scope) []docStatement {
	t.Helper()
	var out []docStatement
	for _, b := range doc.Body.Blocks {
		switch {
		case b.Type == "statement":
			out = append(out, evalStatement(t, b.Body, s))
		case b.Type == "dynamic" && b.Labels[0] == "statement":
			eachDynamic(t, b, s, func(content *hclsyntax.Body, inner scope) {
				out = append(out, evalStatement(t, content, inner))
			})
		}
	}
	return out
}

// eachDynamic calls fn with the content of a dynamic block (no iterator
// argument) and the scope of each of its elements.
func eachDynamic(t *testing.T, b *hclsyntax.Block, s scope, fn func(content *hclsyntax.Body, inner scope)) {
	t.Helper()
	require.NotContains(t, b.Body.Attributes, "iterator")
	content := nestedBlock(t, b.Body, "content").Body
	forEach := eval(t, attr(t, b.Body, "for_each").Expr, s)
	for it := forEach.ElementIterator(); it.Next(); {
		k, v := it.Element()
		inner := scope{b.Labels[0]: {"key": k, "value": v}}
		for root, vals := range s {
			inner[root] = vals
		}
		fn(content, inner)
	}
}

func evalStatement(t *testing.T, body *hclsyntax.Body, s scope) docStatement {
	t.Helper()
	st := docStatement{Effect: "Allow", Principals: map[string][]string{}, Conditions: map[string][]string{}, raw: body.Attributes}
	if a, ok := body.Attributes["sid"]; ok {
		st.Sid = eval(t, a.Expr, s).AsString()
	}
	if a, ok := body.Attributes["effect"]; ok {
		st.Effect = eval(t, a.Expr, s).AsString()
	}
	st.Actions = stringList(t, eval(t, attr(t, body, "actions").Expr, s))
	if a, ok := body.Attributes["resources"]; ok {
		st.Resources = stringList(t, eval(t, a.Expr, s))
	}
	for _, b := range body.Blocks {
		switch b.Type {
		case "principals":
			typ := eval(t, attr(t, b.Body, "type").Expr, s).AsString()
			st.Principals[typ] = append(st.Principals[typ], stringList(t, eval(t, attr(t, b.Body, "identifiers").Expr, s))...)
		case "condition":
			key := eval(t, attr(t, b.Body, "test").Expr, s).AsString() + " " + eval(t, attr(t, b.Body, "variable").Expr, s).AsString()
			st.Conditions[key] = stringList(t, eval(t, attr(t, b.Body, "values").Expr, s))
		default:
			t.Fatalf("statement %s: unexpected block %s", st.Sid, b.Type)
		}
	}
	return st
}

// actionsBySid maps each statement's Sid to its sorted actions; every
// statement is an Allow without wildcards, on named resources.
func actionsBySid(t *testing.T, sts []docStatement) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, st := range sts {
		require.Equal(t, "Allow", st.Effect, st.Sid)
		require.NotContains(t, st.raw, "not_actions", st.Sid)
		for _, a := range st.Actions {
			require.NotContains(t, a, "*", "%s: wildcard action", st.Sid)
		}
		require.NotEmpty(t, st.Resources, st.Sid)
		require.NotContains(t, st.Resources, "*", st.Sid)
		actions := append([]string(nil), st.Actions...)
		sort.Strings(actions)
		out[st.Sid] = actions
	}
	return out
}

// ---------------------------------------------------------------------------
// modules/operator-policy

const (
	testTableARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/exactly-dedup"
	testQueueARN = "arn:aws:sqs:eu-west-1:123456789012:exactly-demo.fifo"
)

// The operator commands' calls, by policy and statement.
var (
	operatorReadActions = map[string][]string{
		"ReadRecords": {"dynamodb:GetItem", "dynamodb:Scan"},                 // inspect, stuck
		"ScopeKeys":   {"sqs:GetQueueAttributes", "sqs:GetQueueUrl"},         // inspect --queue, and its DLQ
		"FindInDLQ":   {"sqs:ChangeMessageVisibility", "sqs:ReceiveMessage"}, // inspect: is it in the DLQ?
	}
	operatorForgetActions = map[string][]string{
		"ForgetRecord": {"dynamodb:DeleteItem", "dynamodb:GetItem"}, // forget reads, shows, then deletes
	}
)

// commandActions are the IAM actions internal/cli/records.go names in its
// access-denied hints (denied(err, "service:Action", ...)) and in
// locateActions (inspect's search of the DLQ, whose refusal it tells
// without failing): one per AWS call the operator commands make.
func commandActions(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("../../internal/cli/records.go")
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile(`denied\([^\n]*?"((?:dynamodb|sqs):[A-Za-z]+)"`).FindAllStringSubmatch(string(src), -1) {
		out = append(out, m[1])
	}
	locate := regexp.MustCompile(`(?s)\nvar locateActions = \[\]string\{(.*?)\}`).FindStringSubmatch(string(src))
	require.NotNil(t, locate, "records.go lists locateActions")
	for _, m := range regexp.MustCompile(`"((?:dynamodb|sqs):[A-Za-z]+)"`).FindAllStringSubmatch(locate[1], -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out)
	sort.Strings(out)
	return dedupe(out)
}

func dedupe(sorted []string) []string {
	var out []string
	for _, s := range sorted {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// TestOperatorPolicyHoldsExactlyTheCommandsCalls: the read and forget
// policies together hold exactly the actions the operator commands call, no
// more; DeleteItem is in the forget policy only, and forget's own calls
// (readRecord, then DeleteItem) are all in it.
func TestOperatorPolicyHoldsExactlyTheCommandsCalls(t *testing.T) {
	m := load(t, "modules/operator-policy")
	vars := m.withVars(t, map[string]cty.Value{"dedup_table_arn": str(testTableARN), "queue_arns": strList(testQueueARN), "dlq_arns": strList(testDLQARN)})
	s := scope{"var": vars}

	read := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.read"), s)
	require.Equal(t, operatorReadActions, actionsBySid(t, read))
	forget := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.forget"), s)
	require.Equal(t, operatorForgetActions, actionsBySid(t, forget))
	for _, st := range append(read, forget...) {
		switch {
		case strings.HasPrefix(st.Actions[0], "dynamodb:"):
			require.Equal(t, []string{testTableARN}, st.Resources, st.Sid)
		case st.Sid == "FindInDLQ":
			require.Equal(t, []string{testDLQARN}, st.Resources, st.Sid)
		default:
			require.Equal(t, []string{testQueueARN, testDLQARN}, st.Resources, st.Sid)
		}
	}

	// Together: exactly what records.go calls.
	var all []string
	for _, sts := range [][]docStatement{read, forget} {
		for _, st := range sts {
			all = append(all, st.Actions...)
		}
	}
	sort.Strings(all)
	require.Equal(t, commandActions(t), dedupe(all), "the operator policies must hold exactly the actions of internal/cli/records.go")

	// forget reads the record it shows, then deletes it.
	src, err := os.ReadFile("../../internal/cli/records.go")
	require.NoError(t, err)
	body := regexp.MustCompile(`(?s)\nfunc forget\(.*?\n}\n`).FindString(string(src))
	require.Contains(t, body, "readRecord(")
	require.Contains(t, body, "operator.Forget(")

	// Without queues, inspect works with --key only: no SQS statement.
	read = policyStatements(t, m.dataSource(t, "aws_iam_policy_document.read"), scope{"var": m.withVars(t, map[string]cty.Value{"dedup_table_arn": str(testTableARN)})})
	require.Equal(t, map[string][]string{"ReadRecords": operatorReadActions["ReadRecords"]}, actionsBySid(t, read))

	// The forget policy is its own resource, and optional; the read policy holds no delete.
	require.Equal(t, "data.aws_iam_policy_document.read.json", m.text(attr(t, m.resource(t, "aws_iam_policy.read").Body, "policy").Expr))
	require.Equal(t, "data.aws_iam_policy_document.forget[0].json", m.text(attr(t, m.resource(t, "aws_iam_policy.forget").Body, "policy").Expr))
	for _, key := range []string{"aws_iam_policy.forget", "data.aws_iam_policy_document.forget"} {
		var b *hclsyntax.Block
		if strings.HasPrefix(key, "data.") {
			b = m.dataSource(t, strings.TrimPrefix(key, "data."))
		} else {
			b = m.resource(t, key)
		}
		require.Equal(t, "var.create_forget_policy ? 1 : 0", m.text(attr(t, b.Body, "count").Expr), key)
	}
	require.True(t, m.defaults(t)["create_forget_policy"].True())

	// The module attaches nothing to anyone.
	for key := range m.resources {
		require.True(t, strings.HasPrefix(key, "aws_iam_policy."), "%s: the operator-policy module only makes policies", key)
	}
	require.False(t, m.valid(t, "dedup_table_arn", str("exactly-dedup")), "a table ARN")
	require.False(t, m.valid(t, "queue_arns", strList("https://sqs.eu-west-1.amazonaws.com/123456789012/q")), "queue ARNs, not URLs")
}

// TestOperatorOutboxPolicy: with outbox_table_arn, a policy of its own
// holds what worker outbox, release and drop call (GetItem, Query, and
// UpdateItem for the TransactWriteItems of updates) on the table and its
// indexes; without, none.
func TestOperatorOutboxPolicy(t *testing.T) {
	m := load(t, "modules/operator-policy")
	doc := m.dataSource(t, "aws_iam_policy_document.outbox")
	vars := m.withVars(t, map[string]cty.Value{"dedup_table_arn": str(testTableARN), "outbox_table_arn": str(testOutboxTableARN)})
	sts := policyStatements(t, doc, scope{"var": vars})
	require.Equal(t, map[string][]string{"HeldGroups": {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"}}, actionsBySid(t, sts))
	require.Equal(t, []string{testOutboxTableARN, testOutboxTableARN + "/index/*"}, sts[0].Resources)
	for _, b := range []*hclsyntax.Block{doc, m.resource(t, "aws_iam_policy.outbox")} {
		require.Equal(t, "var.outbox_table_arn != null ? 1 : 0", m.text(attr(t, b.Body, "count").Expr))
	}
	require.True(t, m.defaults(t)["outbox_table_arn"].IsNull())
	require.False(t, m.valid(t, "outbox_table_arn", str("exactly-outbox")), "a table ARN")

	// What the commands call: Release and Drop read the head, then write
	// one transaction of Updates; worker outbox lists with Query.
	src, err := os.ReadFile("../../outbox/operator.go")
	require.NoError(t, err)
	for _, call := range []string{"db.GetItem(", "db.TransactWriteItems("} {
		require.Contains(t, string(src), call)
	}
	require.NotContains(t, string(src), "Delete:", "release and drop delete nothing")
	require.NotContains(t, string(src), "Put:", "release and drop only update")
}

// TestOperatorPoliciesNeverReachAWorkerRole: no worker module grants the
// operator commands' reads or delete on any table, and no module or example
// attaches the operator policies to anything; both examples make them.
func TestOperatorPoliciesNeverReachAWorkerRole(t *testing.T) {
	for _, dir := range []string{"modules/worker-ecs", "modules/worker-lambda"} {
		m := load(t, dir)
		for file, src := range m.src {
			for _, action := range []string{"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:*"} {
				require.NotContains(t, string(src), `"`+action+`"`, "%s grants %s", file, action)
			}
		}
		// GetItem is the outbox's only (a producer reads its group's head),
		// on the outbox table only; without it, nowhere.
		for _, outbox := range []bool{false, true} {
			for _, st := range workerPolicy(t, m, outbox) {
				if st.Sid == "OutboxTable" {
					require.Equal(t, []string{testOutboxTableARN}, st.Resources, dir)
					continue
				}
				require.NotContains(t, st.Actions, "dynamodb:GetItem", "%s: statement %s", dir, st.Sid)
			}
		}
	}
	for _, dir := range moduleDirs(t) {
		m := load(t, dir)
		for key, r := range m.resources {
			text := m.text(r.Body)
			require.NotContains(t, text, "module.operator_policy", "%s: %s uses the operator policies", dir, key)
			require.NotContains(t, text, "aws_iam_policy.forget", "%s: %s uses the forget policy", dir, key)
		}
		for name, c := range m.calls {
			if strings.HasSuffix(m.text(attr(t, c.Body, "source").Expr), `/operator-policy"`) {
				continue
			}
			require.NotContains(t, m.text(c.Body), "module.operator_policy", "%s: module %s is given the operator policies", dir, name)
		}
	}
	for _, dir := range []string{"examples/ecs", "examples/lambda"} {
		m := load(t, dir)
		c := m.call(t, "operator_policy")
		require.Equal(t, "../../modules/operator-policy", literal(t, attr(t, c.Body, "source").Expr).AsString(), dir)
		require.Equal(t, "module.dedup_table.table_arn", m.text(attr(t, c.Body, "dedup_table_arn").Expr), dir)
		require.Equal(t, "[module.queue.queue_arn]", m.text(attr(t, c.Body, "queue_arns").Expr), dir)
	}
}

// ---------------------------------------------------------------------------
// Worker roles: trust, path, boundary

func TestWorkerRolesTrustOnlyTheirServiceInTheirAccount(t *testing.T) {
	// ECS: both roles, tasks of the cluster's account and region only.
	m := load(t, "modules/worker-ecs")
	vars := ecsVars(t, m, map[string]cty.Value{"cluster_arn": str("arn:aws-cn:ecs:cn-north-1:210987654321:cluster/c")})
	sts := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.assume"), scope{"var": vars, "local": m.evalLocals(vars)})
	require.Len(t, sts, 1)
	require.Equal(t, "Allow", sts[0].Effect)
	require.Equal(t, []string{"sts:AssumeRole"}, sts[0].Actions)
	require.Equal(t, map[string][]string{"Service": {"ecs-tasks.amazonaws.com"}}, sts[0].Principals)
	require.Equal(t, map[string][]string{
		"StringEquals aws:SourceAccount": {"210987654321"},
		"ArnLike aws:SourceArn":          {"arn:aws-cn:ecs:cn-north-1:210987654321:*"},
	}, sts[0].Conditions)
	for _, role := range []string{"aws_iam_role.task", "aws_iam_role.execution"} {
		r := m.resource(t, role)
		require.Equal(t, "data.aws_iam_policy_document.assume.json", m.text(attr(t, r.Body, "assume_role_policy").Expr), role)
		require.Equal(t, "var.permissions_boundary", m.text(attr(t, r.Body, "permissions_boundary").Expr), role)
		require.Equal(t, "var.role_path", m.text(attr(t, r.Body, "path").Expr), role)
	}

	// Lambda: functions of the account the role is made in.
	m = load(t, "modules/worker-lambda")
	m.dataSource(t, "aws_caller_identity.current")
	sts = policyStatements(t, m.dataSource(t, "aws_iam_policy_document.assume"), scope{
		"var":  lambdaVars(t, m, nil),
		"data": {"aws_caller_identity": cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"account_id": str("123456789012")})})},
	})
	require.Len(t, sts, 1)
	require.Equal(t, []string{"sts:AssumeRole"}, sts[0].Actions)
	require.Equal(t, map[string][]string{"Service": {"lambda.amazonaws.com"}}, sts[0].Principals)
	require.Equal(t, map[string][]string{"StringEquals aws:SourceAccount": {"123456789012"}}, sts[0].Conditions)
	r := m.resource(t, "aws_iam_role.this")
	require.Equal(t, "data.aws_iam_policy_document.assume.json", m.text(attr(t, r.Body, "assume_role_policy").Expr))
	require.Equal(t, "var.permissions_boundary", m.text(attr(t, r.Body, "permissions_boundary").Expr))
	require.Equal(t, "var.role_path", m.text(attr(t, r.Body, "path").Expr))

	// Every role of the worker modules is one of those above.
	for _, dir := range []string{"modules/worker-ecs", "modules/worker-lambda"} {
		n := 0
		for key := range load(t, dir).resources {
			if strings.HasPrefix(key, "aws_iam_role.") {
				n++
			}
		}
		require.Equal(t, map[string]int{"modules/worker-ecs": 2, "modules/worker-lambda": 1}[dir], n, "%s: a new role needs the same trust conditions", dir)
	}

	for _, dir := range []string{"modules/worker-ecs", "modules/worker-lambda", "modules/operator-policy"} {
		m := load(t, dir)
		pathVar := "role_path"
		if dir == "modules/operator-policy" {
			pathVar = "path"
		}
		d := m.defaults(t)
		require.Equal(t, "/", d[pathVar].AsString(), dir)
		for _, p := range []string{"/", "/exactly/", "/team/exactly/"} {
			require.True(t, m.valid(t, pathVar, str(p)), "%s: %s %q", dir, pathVar, p)
		}
		for _, p := range []string{"", "exactly/", "/exactly", "/ex actly/"} {
			require.False(t, m.valid(t, pathVar, str(p)), "%s: %s %q", dir, pathVar, p)
		}
		if dir == "modules/operator-policy" {
			continue
		}
		require.True(t, d["permissions_boundary"].IsNull(), dir)
		require.True(t, m.valid(t, "permissions_boundary", nullString()), dir)
		require.True(t, m.valid(t, "permissions_boundary", str("arn:aws:iam::123456789012:policy/boundary")), dir)
		require.True(t, m.valid(t, "permissions_boundary", str("arn:aws:iam::aws:policy/PowerUserAccess")), dir)
		require.False(t, m.valid(t, "permissions_boundary", str("boundary")), "%s: a policy ARN", dir)
		require.False(t, m.valid(t, "permissions_boundary", str("arn:aws:iam::123456789012:role/r")), "%s: a policy, not a role", dir)
	}
}

// ---------------------------------------------------------------------------
// modules/queue: no plain HTTP

func TestQueueDeniesPlainHTTP(t *testing.T) {
	m := load(t, "modules/queue")
	require.True(t, m.defaults(t)["deny_insecure_transport"].True(), "on by default")

	queues := func(vars map[string]cty.Value) map[string]cty.Value {
		s := scope{"var": m.withVars(t, vars), "aws_sqs_queue": {
			"this": cty.ObjectVal(map[string]cty.Value{"arn": str(testQueueARN), "id": str("https://q/exactly-demo.fifo")}),
			"dlq": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"arn": str("arn:aws:sqs:eu-west-1:123456789012:exactly-demo-dlq.fifo"), "id": str("https://q/exactly-demo-dlq.fifo"),
			})}),
		}}
		if create, ok := vars["create_dlq"]; ok && create.False() {
			s["aws_sqs_queue"]["dlq"] = cty.EmptyTupleVal
		}
		return eval(t, m.locals["policy_queues"].Expr, s).AsValueMap()
	}
	keys := func(vals map[string]cty.Value) []string {
		var out []string
		for k := range vals {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	srcDoc := `{"Version":"2012-10-17","Statement":[]}`
	require.Equal(t, []string{"dlq", "queue"}, keys(queues(map[string]cty.Value{"name": str("q")})))
	require.Equal(t, []string{"queue"}, keys(queues(map[string]cty.Value{"name": str("q"), "create_dlq": cty.False})))
	require.Empty(t, keys(queues(map[string]cty.Value{"name": str("q"), "deny_insecure_transport": cty.False})))
	require.Equal(t, []string{"queue"}, keys(queues(map[string]cty.Value{
		"name": str("q"), "deny_insecure_transport": cty.False, "source_queue_policy_documents": strList(srcDoc),
	})), "the caller's statements without the deny")

	doc := m.dataSource(t, "aws_iam_policy_document.queue")
	require.Equal(t, "local.policy_queues", m.text(attr(t, doc.Body, "for_each").Expr))
	require.Equal(t, "each.value.sources", m.text(attr(t, doc.Body, "source_policy_documents").Expr))
	for name, q := range queues(map[string]cty.Value{"name": str("q"), "source_queue_policy_documents": strList(srcDoc)}) {
		if name == "queue" {
			require.Equal(t, []string{srcDoc}, stringList(t, q.GetAttr("sources")))
		} else {
			require.Zero(t, q.GetAttr("sources").LengthInt(), "the DLQ takes no caller statements")
		}
		for _, deny := range []bool{true, false} {
			sts := policyStatements(t, doc, scope{
				"var":  m.withVars(t, map[string]cty.Value{"name": str("q"), "deny_insecure_transport": cty.BoolVal(deny)}),
				"each": {"key": str(name), "value": q},
			})
			if !deny {
				require.Empty(t, sts, name)
				continue
			}
			require.Len(t, sts, 1, name)
			st := sts[0]
			require.Equal(t, "DenyInsecureTransport", st.Sid)
			require.Equal(t, "Deny", st.Effect)
			require.Equal(t, []string{"sqs:*"}, st.Actions)
			require.Equal(t, []string{q.GetAttr("arn").AsString()}, st.Resources, "%s: its own ARN", name)
			require.Equal(t, map[string][]string{"*": {"*"}}, st.Principals, "whoever calls")
			require.Equal(t, map[string][]string{"Bool aws:SecureTransport": {"false"}}, st.Conditions)
		}
	}

	pol := m.resource(t, "aws_sqs_queue_policy.this")
	require.Equal(t, "local.policy_queues", m.text(attr(t, pol.Body, "for_each").Expr))
	require.Equal(t, "each.value.url", m.text(attr(t, pol.Body, "queue_url").Expr))
	require.Equal(t, "data.aws_iam_policy_document.queue[each.key].json", m.text(attr(t, pol.Body, "policy").Expr))
	require.Len(t, policyResources(m), 1, "one aws_sqs_queue_policy resource: SQS keeps one policy per queue")
}

func policyResources(m *module) []string {
	var out []string
	for key := range m.resources {
		if strings.HasPrefix(key, "aws_sqs_queue_policy.") {
			out = append(out, key)
		}
	}
	return out
}
