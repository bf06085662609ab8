package terraform_test

import (
	"encoding/json"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// The outbox's contract with the infrastructure, from the Go side: the
// table's format (outbox package), the relay's default table (cli), and the
// relay's EMF metrics (telemetry).
var (
	outboxStreamView   = string(types.StreamViewTypeKeysOnly)
	outboxTableDefault = cli.DefaultOutboxTable
)

// outboxSettings are the settings the outbox modules pass that the relay
// (worker relay, and WORKER_COMMAND=relay on Lambda) reads.
var outboxSettings = []string{
	"WORKER_OUTBOX_TABLE", "WORKER_RELAY_POLL", "WORKER_RELAY_RETENTION", "WORKER_COMMAND",
}

// workerOutboxActions: what a worker whose effect sends through the outbox
// calls on the outbox table.
var workerOutboxActions = []string{
	"dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
}

// The relay's calls, by statement: Query, GetItem, UpdateItem and
// ConditionCheckItem (the last two also as items of TransactWriteItems) on
// the table, Query on its pending index, SendMessage (also SendMessageBatch)
// on the destination queues, the queues' keys if any; the Lambda relay
// also reads the stream (its event source mapping polls with its role) and
// writes its log streams.
var (
	relayActions = map[string][]string{
		"OutboxTable":        {"dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"},
		"OutboxPendingIndex": {"dynamodb:Query"},
		"Publish":            {"sqs:SendMessage"},
		"PublishTopic":       {"sns:Publish"},
		"QueueKeys":          {"kms:Decrypt", "kms:GenerateDataKey"},
	}
	relayStreamActions = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
)

const (
	testOutboxTableARN  = "arn:aws:dynamodb:eu-west-1:123456789012:table/exactly-outbox"
	testOutboxStreamARN = testOutboxTableARN + "/stream/2026-01-01T00:00:00.000"
	testLogGroupARN     = "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/exactly-relay"
)

// TestOutboxSettingsExistInTheWorker: every setting the outbox modules pass
// is read by the binary. Until the relay's code is in the tree (none of them
// is), the check waits; once one is, all must be.
func TestOutboxSettingsExistInTheWorker(t *testing.T) {
	known := knownSettings(t)
	var missing []string
	for _, name := range outboxSettings {
		if !slices.Contains(known, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == len(outboxSettings) {
		t.Skipf("the binary reads none of %v yet (the relay is not in this tree)", outboxSettings)
	}
	require.Empty(t, missing, "the binary reads no %v", missing)
}

// ---------------------------------------------------------------------------
// modules/outbox-table

// TestOutboxTableMatchesTheSchema evaluates the table resource and compares
// it with outboxschema.CreateTableInput, what `worker setup` creates: attributes,
// keys, the pending index and its projection, the stream; and the TTL
// attribute with outboxschema.AttrTTL.
func TestOutboxTableMatchesTheSchema(t *testing.T) {
	m := load(t, "modules/outbox-table")
	d := m.defaults(t)
	require.Equal(t, outboxTableDefault, d["name"].AsString(), "the relay's default WORKER_OUTBOX_TABLE")
	want := outboxschema.CreateTableInput(outboxTableDefault)

	l := m.evalLocals(d)
	s := scope{"var": d, "local": l}
	tbl := m.resource(t, "aws_dynamodb_table.this")
	ev := func(body *hclsyntax.Body, path ...string) cty.Value {
		return eval(t, attr(t, body, path...).Expr, s)
	}

	require.Equal(t, "var.name", m.text(attr(t, tbl.Body, "name").Expr))
	require.Equal(t, string(want.BillingMode), ev(tbl.Body, "billing_mode").AsString(), "on-demand by default")

	// Attributes: the same names and types, each once.
	got := map[string]string{}
	for _, b := range tbl.Body.Blocks {
		if b.Type == "attribute" {
			name := ev(b.Body, "name").AsString()
			_, dup := got[name]
			require.False(t, dup, "attribute %s twice", name)
			got[name] = ev(b.Body, "type").AsString()
		}
	}
	wantAttrs := map[string]string{}
	for _, a := range want.AttributeDefinitions {
		wantAttrs[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	require.Equal(t, wantAttrs, got)

	keys := func(schema []types.KeySchemaElement) (hash, rng string) {
		for _, k := range schema {
			switch k.KeyType {
			case types.KeyTypeHash:
				hash = aws.ToString(k.AttributeName)
			case types.KeyTypeRange:
				rng = aws.ToString(k.AttributeName)
			}
		}
		return hash, rng
	}
	hash, rng := keys(want.KeySchema)
	require.Equal(t, outboxschema.AttrPK, hash)
	require.Equal(t, outboxschema.AttrSK, rng)
	require.Equal(t, hash, ev(tbl.Body, "hash_key").AsString())
	require.Equal(t, rng, ev(tbl.Body, "range_key").AsString())

	require.Len(t, want.GlobalSecondaryIndexes, 1)
	gsi := want.GlobalSecondaryIndexes[0]
	idx := nestedBlock(t, tbl.Body, "global_secondary_index")
	require.Equal(t, outboxschema.PendingIndex, aws.ToString(gsi.IndexName))
	require.Equal(t, outboxschema.PendingIndex, ev(idx.Body, "name").AsString())
	hash, rng = keys(gsi.KeySchema)
	require.Equal(t, outboxschema.AttrShard, hash)
	require.Equal(t, outboxschema.AttrSince, rng)
	require.Equal(t, hash, ev(idx.Body, "hash_key").AsString())
	require.Equal(t, rng, ev(idx.Body, "range_key").AsString())
	require.Equal(t, string(gsi.Projection.ProjectionType), ev(idx.Body, "projection_type").AsString())
	require.True(t, ev(idx.Body, "read_capacity").IsNull(), "no capacity on demand")

	require.True(t, aws.ToBool(want.StreamSpecification.StreamEnabled))
	require.True(t, ev(tbl.Body, "stream_enabled").True())
	require.Equal(t, outboxStreamView, string(want.StreamSpecification.StreamViewType))
	require.Equal(t, outboxStreamView, ev(tbl.Body, "stream_view_type").AsString(), "the relay reads keys only")

	// TTL deletes published messages; encryption, recovery, protection as the dedup table.
	require.True(t, literal(t, attr(t, tbl.Body, "ttl", "enabled").Expr).True())
	require.Equal(t, outboxschema.AttrTTL, ev(tbl.Body, "ttl", "attribute_name").AsString())
	requireEncrypted(t, m, tbl)
	require.Equal(t, "var.point_in_time_recovery_enabled", m.text(attr(t, tbl.Body, "point_in_time_recovery", "enabled").Expr))
	require.Equal(t, "var.deletion_protection_enabled", m.text(attr(t, tbl.Body, "deletion_protection_enabled").Expr))
	require.True(t, d["point_in_time_recovery_enabled"].True())
	require.True(t, d["deletion_protection_enabled"].True())

	// Provisioned: capacities on the table and the index, both required.
	prov := m.withVars(t, map[string]cty.Value{"billing_mode": str("PROVISIONED"), "read_capacity": num(5), "write_capacity": num(10)})
	ps := scope{"var": prov, "local": m.evalLocals(prov)}
	require.EqualValues(t, 10, asInt(eval(t, attr(t, tbl.Body, "write_capacity").Expr, ps)))
	require.EqualValues(t, 5, asInt(eval(t, attr(t, idx.Body, "read_capacity").Expr, ps)))
	require.True(t, preconditions(t, tbl, ps))
	noCap := m.withVars(t, map[string]cty.Value{"billing_mode": str("PROVISIONED")})
	require.False(t, preconditions(t, tbl, scope{"var": noCap, "local": m.evalLocals(noCap)}), "provisioned without capacities")
	require.True(t, preconditions(t, tbl, s))
	require.False(t, m.valid(t, "billing_mode", str("ON_DEMAND")))

	// Outputs: the index ARN the relays' Query is granted on, the stream.
	out := scope{"local": l, "aws_dynamodb_table": {"this": cty.ObjectVal(map[string]cty.Value{
		"arn": str(testOutboxTableARN), "name": str(outboxTableDefault), "stream_arn": str(testOutboxStreamARN),
	})}}
	require.Equal(t, testOutboxTableARN+"/index/"+outboxschema.PendingIndex, eval(t, attr(t, m.outputs["pending_index_arn"].Body, "value").Expr, out).AsString())
	require.Equal(t, testOutboxStreamARN, eval(t, attr(t, m.outputs["stream_arn"].Body, "value").Expr, out).AsString())
	require.Equal(t, outboxTableDefault, eval(t, attr(t, m.outputs["table_name"].Body, "value").Expr, out).AsString())
	require.Equal(t, testOutboxTableARN, eval(t, attr(t, m.outputs["table_arn"].Body, "value").Expr, out).AsString())
}

// ---------------------------------------------------------------------------
// modules/relay-ecs and modules/relay-lambda

func relayECSVars(t *testing.T, m *module, extra map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	vars := map[string]cty.Value{
		"cluster_arn": str("arn:aws:ecs:eu-west-1:123456789012:cluster/c"), "container_image": str("img"),
		"subnet_ids": strList("s"), "security_group_ids": strList("g"),
		"outbox_table_arn": str(testOutboxTableARN), "queue_arns": strList(testQueueARN),
	}
	for k, v := range extra {
		vars[k] = v
	}
	return m.withVars(t, vars)
}

func relayLambdaVars(t *testing.T, m *module, extra map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	vars := map[string]cty.Value{
		"package_path":     str("dist/worker-lambda-arm64.zip"),
		"outbox_table_arn": str(testOutboxTableARN), "outbox_stream_arn": str(testOutboxStreamARN),
		"queue_arns": strList(testQueueARN),
	}
	for k, v := range extra {
		vars[k] = v
	}
	return m.withVars(t, vars)
}

// relayPolicy evaluates the relay's role policy document.
func relayPolicy(t *testing.T, dir string, extra map[string]cty.Value) []docStatement {
	t.Helper()
	m := load(t, dir)
	if dir == "modules/relay-ecs" {
		vars := relayECSVars(t, m, extra)
		return policyStatements(t, m.dataSource(t, "aws_iam_policy_document.task"), scope{"var": vars, "local": m.evalLocals(vars)})
	}
	vars := relayLambdaVars(t, m, extra)
	return policyStatements(t, m.dataSource(t, "aws_iam_policy_document.this"), scope{
		"var": vars, "local": m.evalLocals(vars),
		"aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"arn": str(testLogGroupARN)})},
	})
}

// TestRelayRolesAreLeastPrivilege: each relay role holds exactly the relay's
// calls, on the outbox table, its pending index (and stream) and the given
// queues only; never DeleteItem, Scan or a wildcard.
func TestRelayRolesAreLeastPrivilege(t *testing.T) {
	const otherQueue = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
	for _, dir := range []string{"modules/relay-ecs", "modules/relay-lambda"} {
		want := map[string][]string{}
		for sid, actions := range relayActions {
			want[sid] = actions
		}
		if dir == "modules/relay-lambda" {
			want["OutboxStream"] = relayStreamActions
			want["Logs"] = []string{"logs:CreateLogStream", "logs:PutLogEvents"}
		}
		sts := relayPolicy(t, dir, map[string]cty.Value{
			"queue_arns": strList(testQueueARN, otherQueue), "kms_key_arns": strList(testKeyARN),
			"topic_arns": strList(testTopicARN),
		})
		require.Equal(t, want, actionsBySid(t, sts), dir)
		resources := map[string][]string{}
		for _, st := range sts {
			resources[st.Sid] = st.Resources
		}
		require.Equal(t, []string{testOutboxTableARN}, resources["OutboxTable"], dir)
		require.Equal(t, []string{testOutboxTableARN + "/index/" + outboxschema.PendingIndex}, resources["OutboxPendingIndex"], "%s: the index the relay sweeps", dir)
		require.Equal(t, []string{testQueueARN, otherQueue}, resources["Publish"], dir)
		require.Equal(t, []string{testKeyARN}, resources["QueueKeys"], dir)
		require.Equal(t, []string{testTopicARN}, resources["PublishTopic"], "%s: sns:Publish on the given topics only", dir)

		// Topics only: no SQS statement; queues only: no SNS statement.
		topicsOnly := actionsBySid(t, relayPolicy(t, dir, map[string]cty.Value{"queue_arns": strList(), "topic_arns": strList(testTopicARN)}))
		require.NotContains(t, topicsOnly, "Publish", dir)
		require.Contains(t, topicsOnly, "PublishTopic", dir)
		require.NotContains(t, actionsBySid(t, relayPolicy(t, dir, nil)), "PublishTopic", dir)
		if dir == "modules/relay-lambda" {
			require.Equal(t, []string{testOutboxStreamARN}, resources["OutboxStream"], "%s: this table's stream only", dir)
			require.Equal(t, []string{testLogGroupARN + ":*"}, resources["Logs"], dir)
		}

		// No customer managed key: no KMS statement.
		require.NotContains(t, actionsBySid(t, relayPolicy(t, dir, nil)), "QueueKeys", dir)

		m := load(t, dir)
		for file, src := range m.src {
			for _, action := range []string{"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:*", "sqs:*"} {
				require.NotContains(t, string(src), `"`+action+`"`, "%s grants %s", file, action)
			}
		}
		require.False(t, m.valid(t, "queue_arns", strList("https://sqs.eu-west-1.amazonaws.com/123456789012/q")), "%s: ARNs, not URLs", dir)
		require.True(t, m.valid(t, "queue_arns", strList()), "%s: a relay may publish to topics only", dir)
		require.False(t, m.valid(t, "topic_arns", strList(testQueueARN)), "%s: SNS topic ARNs", dir)
		require.True(t, m.valid(t, "topic_arns", strList(testTopicARN, "arn:aws:sns:eu-west-1:123456789012:plain")), dir)
		for _, src := range m.src {
			require.NotContains(t, string(src), `"sns:*"`, dir)
		}
		// Somewhere to publish: a queue or a topic.
		rp := m.resource(t, map[string]string{"modules/relay-ecs": "aws_iam_role_policy.task", "modules/relay-lambda": "aws_iam_role_policy.this"}[dir])
		dests := func(queues, topics cty.Value) bool {
			return preconditions(t, rp, scope{"var": {"queue_arns": queues, "topic_arns": topics}})
		}
		require.False(t, dests(strList(), strList()), "%s: no destination", dir)
		require.True(t, dests(strList(testQueueARN), strList()), dir)
		require.True(t, dests(strList(), strList(testTopicARN)), dir)
		require.False(t, m.valid(t, "outbox_table_arn", str("exactly-outbox")), dir)
	}

	// The policies are the roles' own, on the roles the relays run as.
	m := load(t, "modules/relay-ecs")
	require.Equal(t, "data.aws_iam_policy_document.task.json", m.text(attr(t, m.resource(t, "aws_iam_role_policy.task").Body, "policy").Expr))
	require.Equal(t, "aws_iam_role.task.id", m.text(attr(t, m.resource(t, "aws_iam_role_policy.task").Body, "role").Expr))
	require.Equal(t, "aws_iam_role.task.arn", m.text(attr(t, m.resource(t, "aws_ecs_task_definition.this").Body, "task_role_arn").Expr))
	for key, r := range m.resources {
		if strings.HasPrefix(key, "aws_iam_role_policy_attachment.") {
			require.Equal(t, "aws_iam_role.execution.name", m.text(attr(t, r.Body, "role").Expr), "%s: no managed policy on the task role", key)
		}
	}
	m = load(t, "modules/relay-lambda")
	require.Equal(t, "data.aws_iam_policy_document.this.json", m.text(attr(t, m.resource(t, "aws_iam_role_policy.this").Body, "policy").Expr))
	require.Equal(t, "aws_iam_role.this.arn", m.text(attr(t, m.resource(t, "aws_lambda_function.this").Body, "role").Expr))
	for key := range m.resources {
		require.False(t, strings.HasPrefix(key, "aws_iam_role_policy_attachment."), "%s: managed policies grant more than the relay calls", key)
	}
	require.Contains(t, m.text(attr(t, m.resource(t, "aws_lambda_event_source_mapping.stream").Body, "depends_on").Expr), "aws_iam_role_policy.this",
		"the mapping is created once the role may read the stream")
}

// TestRelayRolesTrustOnlyTheirServiceInTheirAccount: the relays' roles carry
// the worker's trust conditions, path and boundary.
func TestRelayRolesTrustOnlyTheirServiceInTheirAccount(t *testing.T) {
	m := load(t, "modules/relay-ecs")
	vars := relayECSVars(t, m, map[string]cty.Value{"cluster_arn": str("arn:aws-cn:ecs:cn-north-1:210987654321:cluster/c")})
	sts := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.assume"), scope{"var": vars, "local": m.evalLocals(vars)})
	require.Len(t, sts, 1)
	require.Equal(t, []string{"sts:AssumeRole"}, sts[0].Actions)
	require.Equal(t, map[string][]string{"Service": {"ecs-tasks.amazonaws.com"}}, sts[0].Principals)
	require.Equal(t, map[string][]string{
		"StringEquals aws:SourceAccount": {"210987654321"},
		"ArnLike aws:SourceArn":          {"arn:aws-cn:ecs:cn-north-1:210987654321:*"},
	}, sts[0].Conditions)

	m = load(t, "modules/relay-lambda")
	sts = policyStatements(t, m.dataSource(t, "aws_iam_policy_document.assume"), scope{
		"var":  relayLambdaVars(t, m, nil),
		"data": {"aws_caller_identity": cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"account_id": str("123456789012")})})},
	})
	require.Len(t, sts, 1)
	require.Equal(t, map[string][]string{"Service": {"lambda.amazonaws.com"}}, sts[0].Principals)
	require.Equal(t, map[string][]string{"StringEquals aws:SourceAccount": {"123456789012"}}, sts[0].Conditions)

	for dir, roles := range map[string][]string{
		"modules/relay-ecs":    {"aws_iam_role.task", "aws_iam_role.execution"},
		"modules/relay-lambda": {"aws_iam_role.this"},
	} {
		m := load(t, dir)
		n := 0
		for key := range m.resources {
			if strings.HasPrefix(key, "aws_iam_role.") {
				n++
			}
		}
		require.Len(t, roles, n, "%s: a new role needs the same trust conditions", dir)
		for _, role := range roles {
			r := m.resource(t, role)
			require.Equal(t, "data.aws_iam_policy_document.assume.json", m.text(attr(t, r.Body, "assume_role_policy").Expr), role)
			require.Equal(t, "var.permissions_boundary", m.text(attr(t, r.Body, "permissions_boundary").Expr), role)
			require.Equal(t, "var.role_path", m.text(attr(t, r.Body, "path").Expr), role)
		}
		require.False(t, m.valid(t, "role_path", str("exactly/")), dir)
		require.False(t, m.valid(t, "permissions_boundary", str("arn:aws:iam::123456789012:role/r")), dir)
		require.True(t, m.defaults(t)["permissions_boundary"].IsNull(), dir)
	}
}

// TestRelayECSRunsTheRelay evaluates the container definition: the relay
// command, its settings (the defaults the Go side has), the worker's health
// check, awslogs; one task, two during a deployment.
func TestRelayECSRunsTheRelay(t *testing.T) {
	m := load(t, "modules/relay-ecs")
	td := m.resource(t, "aws_ecs_task_definition.this")
	container := func(vars map[string]cty.Value) map[string]any {
		s := scope{"var": vars, "local": m.evalLocals(vars), "aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"name": str("/ecs/exactly-relay")})}}
		var defs []map[string]any
		require.NoError(t, json.Unmarshal([]byte(eval(t, attr(t, td.Body, "container_definitions").Expr, s).AsString()), &defs))
		require.Len(t, defs, 1)
		return defs[0]
	}
	c := container(relayECSVars(t, m, map[string]cty.Value{"environment": strMap("HTTPS_PROXY", "http://proxy:3128")}))
	env := map[string]string{}
	for _, e := range c["environment"].([]any) {
		kv := e.(map[string]any)
		env[kv["name"].(string)] = kv["value"].(string)
	}
	require.Equal(t, []any{"relay"}, c["command"], "worker relay")
	require.Equal(t, outboxTableDefault, env["WORKER_OUTBOX_TABLE"])
	require.Equal(t, cli.DefaultMetricsAddr, env["WORKER_METRICS_ADDR"], "where the health check asks")
	require.Equal(t, "both", env["WORKER_METRICS_FORMAT"], "EMF for the alarms, /metrics for a scraper")
	require.Equal(t, "eu-west-1", env["AWS_REGION"], "the table's region")
	require.Equal(t, "http://proxy:3128", env["HTTPS_PROXY"])
	for name, want := range map[string]time.Duration{"WORKER_RELAY_POLL": time.Second, "WORKER_RELAY_RETENTION": 24 * time.Hour} {
		d, err := time.ParseDuration(env[name])
		require.NoError(t, err, name)
		require.Equal(t, want, d, name)
	}
	var passed []string
	for name := range objectKeys(t, m.locals["relay_settings"].Expr) {
		if name != "AWS_REGION" {
			passed = append(passed, name)
		}
	}
	require.ElementsMatch(t, []string{
		"WORKER_OUTBOX_TABLE", "WORKER_RELAY_POLL", "WORKER_RELAY_RETENTION",
		"WORKER_METRICS_ADDR", "WORKER_METRICS_FORMAT", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL",
	}, passed)
	for _, name := range passed {
		require.True(t, slices.Contains(outboxSettings, name) || slices.Contains(managedSettings, name), "%s is neither the worker's nor the relay's", name)
		require.False(t, m.valid(t, "environment", strMap(name, "x")), "environment cannot set %s", name)
	}
	require.False(t, m.valid(t, "environment", strMap("AWS_REGION", "x")))
	require.False(t, m.valid(t, "poll_interval", str("1 second")))
	require.False(t, m.valid(t, "retention", str("1d")), "a Go duration has no days")

	// The same health check as the worker's container.
	w := load(t, "modules/worker-ecs")
	wc := objectKeys(t, jsonencodeArg(t, attr(t, w.resource(t, "aws_ecs_task_definition.this").Body, "container_definitions").Expr).(*hclsyntax.TupleConsExpr).Exprs[0])
	rc := objectKeys(t, jsonencodeArg(t, attr(t, td.Body, "container_definitions").Expr).(*hclsyntax.TupleConsExpr).Exprs[0])
	require.Equal(t, w.text(objectKeys(t, wc["healthCheck"])["command"]), m.text(objectKeys(t, rc["healthCheck"])["command"]))
	require.Equal(t, []any{"CMD", "/worker", "healthcheck"}, c["healthCheck"].(map[string]any)["command"])
	require.Equal(t, "awslogs", c["logConfiguration"].(map[string]any)["logDriver"])
	require.Equal(t, []string{"FARGATE"}, stringList(t, literal(t, attr(t, td.Body, "requires_compatibilities").Expr)))
	require.Equal(t, "aws_iam_role.execution.arn", m.text(attr(t, td.Body, "execution_role_arn").Expr))
	require.False(t, m.valid(t, "stop_timeout", num(fargateMaxStopSecs+1)))

	// The settings cannot be overridden by environment, even past the validation.
	guard := func(env cty.Value) bool {
		vars := relayECSVars(t, m, map[string]cty.Value{"environment": env})
		return preconditions(t, td, scope{"var": vars, "local": m.evalLocals(vars)})
	}
	require.True(t, guard(strMap("HTTPS_PROXY", "x")))
	require.False(t, guard(strMap("WORKER_RELAY_POLL", "x")))

	svc := m.resource(t, "aws_ecs_service.this")
	require.EqualValues(t, 1, asInt(m.defaults(t)["desired_count"]), "one relay")
	require.Equal(t, "var.desired_count", m.text(attr(t, svc.Body, "desired_count").Expr))
	require.EqualValues(t, 100, asInt(literal(t, attr(t, svc.Body, "deployment_minimum_healthy_percent").Expr)))
	require.EqualValues(t, 200, asInt(literal(t, attr(t, svc.Body, "deployment_maximum_percent").Expr)), "two during a deployment")
	require.Equal(t, "FARGATE", literal(t, attr(t, svc.Body, "launch_type").Expr).AsString())
	require.Equal(t, "aws_ecs_task_definition.this.arn", m.text(attr(t, svc.Body, "task_definition").Expr))
	require.Equal(t, "both", m.defaults(t)["metrics_format"].AsString())
}

// TestRelayLambdaStreamAndSweep: the function runs the relay command, the
// stream's mapping starts at LATEST with bounded retries (the sweep is the
// safety net), and EventBridge invokes the sweep every minute, allowed for
// its rule only.
func TestRelayLambdaStreamAndSweep(t *testing.T) {
	m := load(t, "modules/relay-lambda")
	vars := relayLambdaVars(t, m, nil)
	l := m.evalLocals(vars)
	env := l["environment"].AsValueMap()
	require.Equal(t, "relay", env["WORKER_COMMAND"].AsString())
	require.Equal(t, outboxTableDefault, env["WORKER_OUTBOX_TABLE"].AsString())
	retention, err := time.ParseDuration(env["WORKER_RELAY_RETENTION"].AsString())
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, retention)
	require.NotContains(t, env, "WORKER_METRICS_ADDR", "no metrics server on Lambda")
	require.NotContains(t, env, "AWS_REGION", "reserved on Lambda")
	for name := range objectKeys(t, m.locals["relay_settings"].Expr) {
		require.False(t, m.valid(t, "environment", strMap(name, "x")), "environment cannot set %s", name)
	}

	fn := m.resource(t, "aws_lambda_function.this")
	require.Equal(t, "provided.al2023", literal(t, attr(t, fn.Body, "runtime").Expr).AsString())
	require.Equal(t, "bootstrap", literal(t, attr(t, fn.Body, "handler").Expr).AsString())
	require.Equal(t, "local.environment", m.text(attr(t, fn.Body, "environment", "variables").Expr))
	// The same package as the worker's function.
	w := load(t, "modules/worker-lambda")
	wfn := w.resource(t, "aws_lambda_function.this")
	for _, a := range []string{"filename", "source_code_hash", "architectures", "runtime", "handler"} {
		require.Equal(t, w.text(attr(t, wfn.Body, a).Expr), m.text(attr(t, fn.Body, a).Expr), a)
	}

	esm := m.resource(t, "aws_lambda_event_source_mapping.stream")
	s := scope{"var": vars, "local": l}
	require.Equal(t, "var.outbox_stream_arn", m.text(attr(t, esm.Body, "event_source_arn").Expr))
	require.Equal(t, "aws_lambda_function.this.arn", m.text(attr(t, esm.Body, "function_name").Expr))
	require.Equal(t, "LATEST", literal(t, attr(t, esm.Body, "starting_position").Expr).AsString())
	require.EqualValues(t, 100, asInt(eval(t, attr(t, esm.Body, "batch_size").Expr, s)))
	require.True(t, literal(t, attr(t, esm.Body, "bisect_batch_on_function_error").Expr).True())
	retries := asInt(eval(t, attr(t, esm.Body, "maximum_retry_attempts").Expr, s))
	require.True(t, retries >= 0 && retries <= 10, "bounded retries: a failing batch blocks its shard (got %d)", retries)
	age := asInt(eval(t, attr(t, esm.Body, "maximum_record_age_in_seconds").Expr, s))
	require.True(t, age >= 60 && age <= 3600, "a bounded record age (got %d)", age)
	require.False(t, m.valid(t, "stream_maximum_retry_attempts", num(-1)), "never retry forever")
	require.False(t, m.valid(t, "stream_maximum_record_age_in_seconds", num(-1)), "never keep a record forever")
	require.NotContains(t, esm.Body.Attributes, "destination_config", "the sweep, not a failure destination, picks up what is dropped")

	// The filter: INSERT only by default, none when turned off.
	filters := func(vars map[string]cty.Value) []string {
		var out []string
		for _, b := range esm.Body.Blocks {
			if b.Type != "dynamic" || b.Labels[0] != "filter_criteria" {
				continue
			}
			eachDynamic(t, b, scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
				out = append(out, eval(t, attr(t, content, "filter", "pattern").Expr, inner).AsString())
			})
		}
		return out
	}
	require.Equal(t, []string{`{"eventName":["INSERT"]}`}, filters(vars))
	require.Empty(t, filters(relayLambdaVars(t, m, map[string]cty.Value{"stream_inserts_only": cty.False})))

	rule := m.resource(t, "aws_cloudwatch_event_rule.sweep")
	require.Equal(t, "rate(1 minute)", eval(t, attr(t, rule.Body, "schedule_expression").Expr, s).AsString())
	require.False(t, m.valid(t, "sweep_schedule_expression", str("every minute")))
	require.True(t, m.valid(t, "sweep_schedule_expression", str("rate(5 minutes)")))
	require.True(t, m.valid(t, "sweep_schedule_expression", str("cron(0/2 * * * ? *)")))
	target := m.resource(t, "aws_cloudwatch_event_target.sweep")
	require.Equal(t, "aws_cloudwatch_event_rule.sweep.name", m.text(attr(t, target.Body, "rule").Expr))
	require.Equal(t, "aws_lambda_function.this.arn", m.text(attr(t, target.Body, "arn").Expr))
	require.NotContains(t, target.Body.Attributes, "input", "the scheduled event itself tells the handler it is a sweep")
	perm := m.resource(t, "aws_lambda_permission.sweep")
	require.Equal(t, "lambda:InvokeFunction", literal(t, attr(t, perm.Body, "action").Expr).AsString())
	require.Equal(t, "events.amazonaws.com", literal(t, attr(t, perm.Body, "principal").Expr).AsString())
	require.Equal(t, "aws_cloudwatch_event_rule.sweep.arn", m.text(attr(t, perm.Body, "source_arn").Expr), "this rule only")
	require.Equal(t, "aws_lambda_function.this.function_name", m.text(attr(t, perm.Body, "function_name").Expr))
}

// ---------------------------------------------------------------------------
// Worker modules: the outbox grant

// workerPolicy evaluates a worker module's role policy document, with or
// without the outbox table.
func workerPolicy(t *testing.T, m *module, withOutbox bool) []docStatement {
	t.Helper()
	extra := map[string]cty.Value{"move_to_dlq": cty.False}
	if withOutbox {
		extra["outbox_table_name"] = str(outboxTableDefault)
		extra["outbox_table_arn"] = str(testOutboxTableARN)
	}
	if m.dir == "modules/worker-ecs" {
		vars := ecsVars(t, m, extra)
		return policyStatements(t, m.dataSource(t, "aws_iam_policy_document.task"), scope{"var": vars, "local": m.evalLocals(vars)})
	}
	vars := lambdaVars(t, m, extra)
	return policyStatements(t, m.dataSource(t, "aws_iam_policy_document.this"), scope{
		"var": vars, "local": m.evalLocals(vars),
		"aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"arn": str(testLogGroupARN)})},
	})
}

// TestWorkerOutboxGrantOnlyWithTheTable: without outbox_table_name a worker
// module's role and environment are what they were; with it, the worker
// gets WORKER_OUTBOX_TABLE and exactly the producer's actions on that table.
func TestWorkerOutboxGrantOnlyWithTheTable(t *testing.T) {
	for _, tc := range []struct {
		dir, policy string
		vars        func(*testing.T, *module, map[string]cty.Value) map[string]cty.Value
	}{
		{"modules/worker-ecs", "aws_iam_role_policy.task", ecsVars},
		{"modules/worker-lambda", "aws_iam_role_policy.this", lambdaVars},
	} {
		m := load(t, tc.dir)
		require.True(t, m.defaults(t)["outbox_table_name"].IsNull(), tc.dir)
		require.True(t, m.defaults(t)["outbox_table_arn"].IsNull(), tc.dir)

		without := actionsBySid(t, workerPolicy(t, m, false))
		require.NotContains(t, without, "OutboxTable", tc.dir)
		with := actionsBySid(t, workerPolicy(t, m, true))
		require.Equal(t, workerOutboxActions, with["OutboxTable"], tc.dir)
		delete(with, "OutboxTable")
		require.Equal(t, without, with, "%s: the outbox adds its statement and nothing else", tc.dir)
		for _, st := range workerPolicy(t, m, true) {
			if st.Sid == "OutboxTable" {
				require.Equal(t, []string{testOutboxTableARN}, st.Resources, tc.dir)
			}
		}

		env := m.evalLocals(tc.vars(t, m, nil))["environment"].AsValueMap()
		require.NotContains(t, env, "WORKER_OUTBOX_TABLE", "%s: unset, the worker has no outbox", tc.dir)
		env = m.evalLocals(tc.vars(t, m, map[string]cty.Value{
			"outbox_table_name": str("orders-outbox"), "outbox_table_arn": str(testOutboxTableARN),
		}))["environment"].AsValueMap()
		require.Equal(t, "orders-outbox", env["WORKER_OUTBOX_TABLE"].AsString(), tc.dir)
		require.False(t, m.valid(t, "environment", strMap("WORKER_OUTBOX_TABLE", "x")), tc.dir)

		// Name and ARN go together.
		guard := func(name, arn cty.Value) bool {
			vars := tc.vars(t, m, map[string]cty.Value{"outbox_table_name": name, "outbox_table_arn": arn})
			return preconditions(t, m.resource(t, tc.policy), scope{"var": vars})
		}
		require.True(t, guard(nullString(), nullString()), tc.dir)
		require.True(t, guard(str("t"), str(testOutboxTableARN)), tc.dir)
		require.False(t, guard(str("t"), nullString()), "%s: a name without its grant", tc.dir)
		require.False(t, guard(nullString(), str(testOutboxTableARN)), "%s: a grant without the setting", tc.dir)
	}
}

// ---------------------------------------------------------------------------
// modules/alarms: the relay's EMF metrics

// TestAlarmsOnTheOutboxRelay: the lag, failed and held alarms read the relay's EMF
// contract (namespace, OutboxTable = the table's name, metric names) and
// exist only with outbox_table_name.
func TestAlarmsOnTheOutboxRelay(t *testing.T) {
	m := load(t, "modules/alarms")
	r := m.resource(t, "aws_cloudwatch_metric_alarm.outbox")
	require.Empty(t, forEachKeys(t, m, r, alarmScope(m, alarmVars(t, m, nil), nil)), "no table, no alarm")
	require.True(t, m.defaults(t)["outbox_table_name"].IsNull())
	require.EqualValues(t, 60, asInt(m.defaults(t)["outbox_lag_threshold_seconds"]))

	vars := alarmVars(t, m, map[string]cty.Value{"outbox_table_name": str("exactly-outbox")})
	all := []string{"failed", "held", "lag", "reordered"}
	require.Equal(t, all, forEachKeys(t, m, r, alarmScope(m, vars, nil)))
	for key, tc := range map[string]struct {
		metric, stat, missing string
		threshold             int64
	}{
		"lag":       {telemetry.EMFOutboxLag, "Maximum", "missing", 60},
		"failed":    {telemetry.EMFOutboxFailed, "Sum", "notBreaching", 0},
		"held":      {telemetry.EMFOutboxHeld, "Maximum", "notBreaching", 0},
		"reordered": {telemetry.EMFOutboxReordered, "Sum", "notBreaching", 0},
	} {
		s := alarmScope(m, vars, map[string]cty.Value{"key": str(key), "value": m.evalLocals(vars)["outbox_alarms"].GetAttr(key)})
		require.Equal(t, tc.metric, eval(t, attr(t, r.Body, "metric_name").Expr, s).AsString(), key)
		require.Equal(t, emfNamespace, eval(t, attr(t, r.Body, "namespace").Expr, s).AsString(), key)
		dims := eval(t, attr(t, r.Body, "dimensions").Expr, s).AsValueMap()
		require.Len(t, dims, 1, "%s: the relay writes one dimension", key)
		require.Equal(t, "exactly-outbox", dims[telemetry.EMFOutboxDimension].AsString(), key)
		require.Equal(t, tc.stat, eval(t, attr(t, r.Body, "statistic").Expr, s).AsString(), key)
		require.Equal(t, tc.threshold, asInt(eval(t, attr(t, r.Body, "threshold").Expr, s)), key)
		require.Equal(t, "GreaterThanThreshold", eval(t, attr(t, r.Body, "comparison_operator").Expr, s).AsString(), key)
		require.Equal(t, tc.missing, eval(t, attr(t, r.Body, "treat_missing_data").Expr, s).AsString(), key)
		require.EqualValues(t, 60, asInt(literal(t, attr(t, r.Body, "period").Expr)), key)
		require.Equal(t, "exactly-demo-outbox-"+key, eval(t, attr(t, r.Body, "alarm_name").Expr, s).AsString(), key)

		off := alarmVars(t, m, map[string]cty.Value{"outbox_table_name": str("t"), "outbox_" + key + "_alarm_enabled": cty.False})
		rest := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == key })
		require.Equal(t, rest, forEachKeys(t, m, r, alarmScope(m, off, nil)), key)
	}
	vars = alarmVars(t, m, map[string]cty.Value{"outbox_table_name": str("t"), "outbox_lag_threshold_seconds": num(300)})
	s := alarmScope(m, vars, map[string]cty.Value{"key": str("lag"), "value": m.evalLocals(vars)["outbox_alarms"].GetAttr("lag")})
	require.EqualValues(t, 300, asInt(eval(t, attr(t, r.Body, "threshold").Expr, s)))
	require.False(t, m.valid(t, "outbox_lag_threshold_seconds", num(0)))
}

// ---------------------------------------------------------------------------
// examples

// TestExamplesWireTheOutbox: enable_outbox (off by default) creates the
// table and the relay of the example's runtime, sending to the demo queue,
// and gives the alarms the table.
func TestExamplesWireTheOutbox(t *testing.T) {
	for dir, relay := range map[string]string{"examples/ecs": "relay-ecs", "examples/lambda": "relay-lambda"} {
		m := load(t, dir)
		require.False(t, m.defaults(t)["enable_outbox"].True(), "%s: off by default", dir)
		tbl := m.call(t, "outbox_table")
		rel := m.call(t, "relay")
		require.Equal(t, "../../modules/outbox-table", literal(t, attr(t, tbl.Body, "source").Expr).AsString(), dir)
		require.Equal(t, "../../modules/"+relay, literal(t, attr(t, rel.Body, "source").Expr).AsString(), dir)
		for _, c := range []*hclsyntax.Block{tbl, rel} {
			require.Equal(t, "var.enable_outbox ? 1 : 0", m.text(attr(t, c.Body, "count").Expr), "%s: module %s", dir, c.Labels[0])
		}
		require.Equal(t, "module.outbox_table[0].table_name", m.text(attr(t, rel.Body, "outbox_table_name").Expr), dir)
		require.Equal(t, "module.outbox_table[0].table_arn", m.text(attr(t, rel.Body, "outbox_table_arn").Expr), dir)
		require.Equal(t, "[module.queue.queue_arn]", m.text(attr(t, rel.Body, "queue_arns").Expr), "%s: the relay feeds the demo queue", dir)
		if relay == "relay-lambda" {
			require.Equal(t, "module.outbox_table[0].stream_arn", m.text(attr(t, rel.Body, "outbox_stream_arn").Expr), dir)
			require.Equal(t, "local.package_path", m.text(attr(t, rel.Body, "package_path").Expr), "%s: the worker's zip", dir)
		} else {
			require.Equal(t, "var.container_image", m.text(attr(t, rel.Body, "container_image").Expr), "%s: the worker's image", dir)
			require.Equal(t, "aws_ecs_cluster.this.arn", m.text(attr(t, rel.Body, "cluster_arn").Expr), dir)
		}
		require.Equal(t, "var.deletion_protection", m.text(attr(t, tbl.Body, "deletion_protection_enabled").Expr), dir)

		alarms := m.call(t, "alarms")
		expr := attr(t, alarms.Body, "outbox_table_name").Expr
		require.Equal(t, "var.enable_outbox ? module.outbox_table[0].table_name : null", m.text(expr), dir)
		require.True(t, eval(t, expr.(*hclsyntax.ConditionalExpr).FalseResult, nil).IsNull())
	}
	require.Equal(t, "events", endpointFor["aws_cloudwatch_event_"], "the sweep's rule and target need the events endpoint")
}
