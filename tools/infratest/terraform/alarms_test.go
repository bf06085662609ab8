package terraform_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/exactlyonce/exactly/internal/telemetry"
)

// The worker's CloudWatch EMF contract, from the emitter itself: namespace
// (the default of metrics_namespace), the one dimension, and the Count
// metrics it writes.
const (
	emfNamespace = telemetry.DefaultEMFNamespace
	emfDimension = "Queue"
)

var emfMetrics = []string{telemetry.EMFReceived, telemetry.EMFApplied, telemetry.EMFDuplicates, telemetry.EMFConflicts,
	telemetry.EMFBusy, telemetry.EMFRetries, telemetry.EMFPermanentFailures, telemetry.EMFLeasesLost, telemetry.EMFReturnedNearRedrive}

func alarmVars(t *testing.T, m *module, extra map[string]cty.Value) map[string]cty.Value {
	t.Helper()
	vars := map[string]cty.Value{"queue_name": str("exactly-demo.fifo")}
	for k, v := range extra {
		vars[k] = v
	}
	return m.withVars(t, vars)
}

// forEachKeys evaluates a resource's for_each and returns its keys, sorted.
func forEachKeys(t *testing.T, m *module, r *hclsyntax.Block, s scope) []string {
	t.Helper()
	var keys []string
	for k := range eval(t, attr(t, r.Body, "for_each").Expr, s).AsValueMap() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// metricQuery is one metric_query block of an alarm, evaluated.
type metricQuery struct {
	id, expression, namespace, metric, stat string
	dimensions                              map[string]string
	returnData                              bool
}

// metricQueries evaluates the metric_query blocks of an alarm, static and dynamic.
func metricQueries(t *testing.T, r *hclsyntax.Block, s scope) map[string]metricQuery {
	t.Helper()
	out := map[string]metricQuery{}
	add := func(body *hclsyntax.Body, s scope) {
		q := metricQuery{id: eval(t, attr(t, body, "id").Expr, s).AsString(), dimensions: map[string]string{}}
		if a, ok := body.Attributes["expression"]; ok {
			q.expression = eval(t, a.Expr, s).AsString()
		}
		if a, ok := body.Attributes["return_data"]; ok {
			q.returnData = eval(t, a.Expr, s).True()
		}
		for _, b := range body.Blocks {
			require.Equal(t, "metric", b.Type)
			q.namespace = eval(t, attr(t, b.Body, "namespace").Expr, s).AsString()
			q.metric = eval(t, attr(t, b.Body, "metric_name").Expr, s).AsString()
			q.stat = eval(t, attr(t, b.Body, "stat").Expr, s).AsString()
			require.EqualValues(t, 60, asInt(eval(t, attr(t, b.Body, "period").Expr, s)), q.id)
			for k, v := range eval(t, attr(t, b.Body, "dimensions").Expr, s).AsValueMap() {
				q.dimensions[k] = v.AsString()
			}
		}
		_, dup := out[q.id]
		require.False(t, dup, "metric query id %s twice", q.id)
		require.Regexp(t, `^[a-z][A-Za-z0-9_]*$`, q.id, "CloudWatch wants a lowercase letter first")
		out[q.id] = q
	}
	for _, b := range r.Body.Blocks {
		switch {
		case b.Type == "metric_query":
			add(b.Body, s)
		case b.Type == "dynamic" && b.Labels[0] == "metric_query":
			eachDynamic(t, b, s, add)
		}
	}
	// Exactly one query is the alarm's value, and every id it names exists.
	var returned []string
	for id, q := range out {
		if q.returnData {
			returned = append(returned, id)
			require.NotEmpty(t, q.expression, id)
			// Functions are upper case (SUM, FILL); ids start with a lowercase letter.
			for _, ref := range regexp.MustCompile(`\b[a-z][A-Za-z0-9_]*\b`).FindAllString(q.expression, -1) {
				require.Contains(t, out, ref, "expression %q names no metric query %s", q.expression, ref)
			}
		} else {
			require.NotEmpty(t, q.metric, "%s: a query that is not returned is a metric", id)
		}
	}
	require.Len(t, returned, 1, "one returned query")
	return out
}

func alarmScope(m *module, vars map[string]cty.Value, each map[string]cty.Value) scope {
	s := scope{"var": vars, "local": m.evalLocals(vars)}
	if each != nil {
		s["each"] = each
	}
	return s
}

// TestAlarmsOnTheWorkersMetrics: conflicts, leases lost and permanent failures
// read the EMF contract (namespace, Queue = the queue's name, metric names),
// each on by default and each can be turned off.
func TestAlarmsOnTheWorkersMetrics(t *testing.T) {
	m := load(t, "modules/alarms")
	require.Equal(t, emfNamespace, m.defaults(t)["metrics_namespace"].AsString())
	require.False(t, m.valid(t, "metrics_namespace", str("AWS/SQS")))
	require.False(t, m.valid(t, "metrics_namespace", str("")))

	r := m.resource(t, "aws_cloudwatch_metric_alarm.worker")
	vars := alarmVars(t, m, nil)
	want := map[string]string{"conflicts": "Conflicts", "leases-lost": "LeasesLost", "permanent-failures": "PermanentFailures", "returned-near-redrive": "ReturnedNearRedrive"}
	require.Equal(t, []string{"conflicts", "leases-lost", "permanent-failures", "returned-near-redrive"}, forEachKeys(t, m, r, alarmScope(m, vars, nil)), "all on by default")
	for key, metric := range want {
		require.Contains(t, emfMetrics, metric)
		a := m.evalLocals(vars)["worker_alarms"].GetAttr(key)
		s := alarmScope(m, vars, map[string]cty.Value{"key": str(key), "value": a})
		require.Equal(t, metric, eval(t, attr(t, r.Body, "metric_name").Expr, s).AsString())
		require.Equal(t, emfNamespace, eval(t, attr(t, r.Body, "namespace").Expr, s).AsString())
		dims := eval(t, attr(t, r.Body, "dimensions").Expr, s).AsValueMap()
		require.Len(t, dims, 1, "the worker writes one dimension")
		require.Equal(t, "exactly-demo.fifo", dims[emfDimension].AsString(), "Queue is the queue's name, with .fifo")
		require.Equal(t, "exactly-demo-"+key, eval(t, attr(t, r.Body, "alarm_name").Expr, s).AsString())
		require.Equal(t, "Sum", literal(t, attr(t, r.Body, "statistic").Expr).AsString())
		require.EqualValues(t, 0, asInt(eval(t, attr(t, r.Body, "threshold").Expr, s)), "any one is worth a look")
		require.Equal(t, "GreaterThanThreshold", literal(t, attr(t, r.Body, "comparison_operator").Expr).AsString())
		require.Equal(t, "notBreaching", literal(t, attr(t, r.Body, "treat_missing_data").Expr).AsString(), "a counter not written did not move")

		enabled := strings.ReplaceAll(key, "-", "_") + "_alarm_enabled"
		off := alarmVars(t, m, map[string]cty.Value{enabled: cty.False})
		require.NotContains(t, forEachKeys(t, m, r, alarmScope(m, off, nil)), key, enabled)
		require.Len(t, forEachKeys(t, m, r, alarmScope(m, off, nil)), len(want)-1, enabled)
		threshold := strings.ReplaceAll(key, "-", "_") + "_threshold"
		require.False(t, m.valid(t, threshold, num(-1)), threshold)
		a = m.evalLocals(alarmVars(t, m, map[string]cty.Value{threshold: num(3)}))["worker_alarms"].GetAttr(key)
		require.EqualValues(t, 3, asInt(eval(t, attr(t, r.Body, "threshold").Expr, alarmScope(m, vars, map[string]cty.Value{"key": str(key), "value": a}))), threshold)
	}
	// A namespace of one's own.
	vars = alarmVars(t, m, map[string]cty.Value{"metrics_namespace": str("payments/exactly")})
	a := m.evalLocals(vars)["worker_alarms"].GetAttr("conflicts")
	require.Equal(t, "payments/exactly", eval(t, attr(t, r.Body, "namespace").Expr, alarmScope(m, vars, map[string]cty.Value{"key": str("conflicts"), "value": a})).AsString())
}

// TestAlarmsOnTheDedupTable: throttles and system errors sum metrics that
// exist: ReadThrottleEvents and WriteThrottleEvents per table,
// ThrottledRequests and SystemErrors per table and operation, over the
// operations the worker calls on the table.
func TestAlarmsOnTheDedupTable(t *testing.T) {
	m := load(t, "modules/alarms")
	r := m.resource(t, "aws_cloudwatch_metric_alarm.dedup_table")
	require.Empty(t, forEachKeys(t, m, r, alarmScope(m, alarmVars(t, m, nil), nil)), "no table, no alarm")

	ops := stringList(t, m.defaults(t)["dedup_table_operations"])
	require.Equal(t, dedupTableOperations(t), ops, "the operations the worker calls on the dedup table")
	require.False(t, m.valid(t, "dedup_table_operations", strList()))
	require.False(t, m.valid(t, "dedup_table_operations", strList("PutItem", "UpdateItem", "TransactWriteItems", "GetItem", "Scan", "Query", "DeleteItem", "BatchWriteItem", "BatchGetItem")), "10 metrics per alarm at most")
	require.False(t, m.valid(t, "dedup_table_operations", strList("putitem")))

	vars := alarmVars(t, m, map[string]cty.Value{"dedup_table_name": str("exactly-dedup")})
	require.Equal(t, []string{"system-errors", "throttles"}, forEachKeys(t, m, r, alarmScope(m, vars, nil)))
	for _, tc := range []struct {
		key           string
		tableMetrics  []string
		perOperation  string
		enabled, eval string
	}{
		{"throttles", []string{"ReadThrottleEvents", "WriteThrottleEvents"}, "ThrottledRequests", "dedup_throttles_alarm_enabled", "dedup_throttles_evaluation_periods"},
		{"system-errors", nil, "SystemErrors", "dedup_system_errors_alarm_enabled", "dedup_system_errors_evaluation_periods"},
	} {
		a := m.evalLocals(vars)["dedup_alarms"].GetAttr(tc.key)
		s := alarmScope(m, vars, map[string]cty.Value{"key": str(tc.key), "value": a})
		qs := metricQueries(t, r, s)
		var tableSeen, opsSeen []string
		var expression string
		for _, q := range qs {
			if q.returnData {
				expression = q.expression
				continue
			}
			require.Equal(t, "AWS/DynamoDB", q.namespace, q.id)
			require.Equal(t, "Sum", q.stat, q.id)
			require.Equal(t, "exactly-dedup", q.dimensions["TableName"], q.id)
			switch len(q.dimensions) {
			case 1:
				tableSeen = append(tableSeen, q.metric)
			case 2:
				require.Equal(t, tc.perOperation, q.metric, "%s: %s exists per table only", tc.key, q.metric)
				opsSeen = append(opsSeen, q.dimensions["Operation"])
			default:
				t.Fatalf("%s: %s: dimensions %v", tc.key, q.id, q.dimensions)
			}
		}
		sort.Strings(tableSeen)
		require.Equal(t, tc.tableMetrics, tableSeen, tc.key)
		require.ElementsMatch(t, ops, opsSeen, "%s: one %s per operation (DynamoDB publishes it per operation only)", tc.key, tc.perOperation)
		require.Len(t, qs, 1+len(tc.tableMetrics)+len(ops), tc.key)
		require.LessOrEqual(t, len(qs)-1, 10, "CloudWatch takes 10 metrics per alarm")
		// Every metric is in the sum, a missing point as 0.
		require.True(t, strings.HasPrefix(expression, "SUM(FILL(["), expression)
		for id, q := range qs {
			if !q.returnData {
				require.Regexp(t, `\b`+id+`\b`, expression, "%s: %s is left out of the sum", tc.key, id)
			}
		}
		require.Equal(t, "exactly-demo-dedup-table-"+tc.key, eval(t, attr(t, r.Body, "alarm_name").Expr, s).AsString())
		require.EqualValues(t, 3, asInt(eval(t, attr(t, r.Body, "evaluation_periods").Expr, s)), "%s: three minutes in a row", tc.key)
		require.EqualValues(t, 0, asInt(eval(t, attr(t, r.Body, "threshold").Expr, s)))

		off := alarmVars(t, m, map[string]cty.Value{"dedup_table_name": str("exactly-dedup"), tc.enabled: cty.False})
		require.NotContains(t, forEachKeys(t, m, r, alarmScope(m, off, nil)), tc.key, tc.enabled)
	}
}

// dedupTableOperations are the DynamoDB calls the worker's ledger makes on the
// dedup table (internal/dedup), but the start-up checks (Describe*).
func dedupTableOperations(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../internal/dedup/*.go")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`\.db\.([A-Z][A-Za-z]+)\(`).FindAllStringSubmatch(string(src), -1) {
			if !strings.HasPrefix(m[1], "Describe") {
				seen[m[1]] = true
			}
		}
	}
	require.NotEmpty(t, seen)
	// In the order the alarms module lists them.
	var out []string
	for _, op := range []string{"PutItem", "UpdateItem", "TransactWriteItems"} {
		if seen[op] {
			out = append(out, op)
			delete(seen, op)
		}
	}
	for op := range seen {
		out = append(out, op) // a new call: the default must list it
	}
	return out
}

func TestAlarmsOnLambda(t *testing.T) {
	m := load(t, "modules/alarms")
	r := m.resource(t, "aws_cloudwatch_metric_alarm.lambda")
	require.Empty(t, forEachKeys(t, m, r, alarmScope(m, alarmVars(t, m, nil), nil)), "no function, no alarm")
	vars := alarmVars(t, m, map[string]cty.Value{"lambda_function_name": str("exactly-demo-worker")})
	require.Equal(t, []string{"errors", "throttles"}, forEachKeys(t, m, r, alarmScope(m, vars, nil)))
	for key, tc := range map[string]struct {
		metric string
		evals  int64
	}{"errors": {"Errors", 1}, "throttles": {"Throttles", 5}} {
		s := alarmScope(m, vars, map[string]cty.Value{"key": str(key), "value": m.evalLocals(vars)["lambda_alarms"].GetAttr(key)})
		require.Equal(t, "AWS/Lambda", literal(t, attr(t, r.Body, "namespace").Expr).AsString())
		require.Equal(t, tc.metric, eval(t, attr(t, r.Body, "metric_name").Expr, s).AsString())
		dims := eval(t, attr(t, r.Body, "dimensions").Expr, s).AsValueMap()
		require.Len(t, dims, 1)
		require.Equal(t, "exactly-demo-worker", dims["FunctionName"].AsString())
		require.Equal(t, "Sum", literal(t, attr(t, r.Body, "statistic").Expr).AsString())
		require.Equal(t, tc.evals, asInt(eval(t, attr(t, r.Body, "evaluation_periods").Expr, s)), key)
		require.Equal(t, "exactly-demo-lambda-"+key, eval(t, attr(t, r.Body, "alarm_name").Expr, s).AsString())
		off := alarmVars(t, m, map[string]cty.Value{"lambda_function_name": str("f"), "lambda_" + key + "_alarm_enabled": cty.False})
		require.NotContains(t, forEachKeys(t, m, r, alarmScope(m, off, nil)), key)
	}
}

// TestAlarmOnECSTasksBelowDesired: desired minus running tasks of the
// service, both from Container Insights, above 0 for five minutes; not a fixed
// count, since autoscaling moves the desired count.
func TestAlarmOnECSTasksBelowDesired(t *testing.T) {
	m := load(t, "modules/alarms")
	r := m.resource(t, "aws_cloudwatch_metric_alarm.ecs_running_tasks")
	count := func(vars map[string]cty.Value) int64 {
		return asInt(eval(t, attr(t, r.Body, "count").Expr, alarmScope(m, vars, nil)))
	}
	require.Zero(t, count(alarmVars(t, m, nil)), "no service, no alarm")
	vars := alarmVars(t, m, map[string]cty.Value{"ecs_cluster_name": str("exactly-demo"), "ecs_service_name": str("exactly-demo-worker")})
	require.EqualValues(t, 1, count(vars))
	require.Zero(t, count(alarmVars(t, m, map[string]cty.Value{"ecs_service_name": str("s"), "ecs_running_tasks_alarm_enabled": cty.False})))
	require.False(t, preconditions(t, r, scope{"var": alarmVars(t, m, map[string]cty.Value{"ecs_service_name": str("s")})}), "a service without its cluster")
	require.True(t, preconditions(t, r, scope{"var": vars}))

	qs := metricQueries(t, r, alarmScope(m, vars, nil))
	require.Len(t, qs, 3)
	require.Equal(t, "desired - running", qs["missing"].expression)
	require.True(t, qs["missing"].returnData)
	for id, metric := range map[string]string{"desired": "DesiredTaskCount", "running": "RunningTaskCount"} {
		require.Equal(t, "ECS/ContainerInsights", qs[id].namespace)
		require.Equal(t, metric, qs[id].metric)
		require.Equal(t, map[string]string{"ClusterName": "exactly-demo", "ServiceName": "exactly-demo-worker"}, qs[id].dimensions)
	}
	s := alarmScope(m, vars, nil)
	require.Equal(t, "GreaterThanThreshold", literal(t, attr(t, r.Body, "comparison_operator").Expr).AsString())
	require.EqualValues(t, 0, asInt(literal(t, attr(t, r.Body, "threshold").Expr)))
	require.EqualValues(t, 5, asInt(eval(t, attr(t, r.Body, "evaluation_periods").Expr, s)), "time for a deployment to start its tasks")
	require.Equal(t, "missing", literal(t, attr(t, r.Body, "treat_missing_data").Expr).AsString(), "no Container Insights is no all-clear")
	require.Equal(t, "exactly-demo-ecs-tasks-below-desired", eval(t, attr(t, r.Body, "alarm_name").Expr, s).AsString())
}

// TestExamplesWireEveryAlarm: each example gives the alarms module the dedup
// table and its runtime (the cluster and service, or the function).
func TestExamplesWireEveryAlarm(t *testing.T) {
	for dir, want := range map[string]map[string]string{
		"examples/ecs": {
			"dedup_table_name": "module.dedup_table.table_name",
			"ecs_cluster_name": "aws_ecs_cluster.this.name",
			"ecs_service_name": "module.worker.service_name",
		},
		"examples/lambda": {
			"dedup_table_name":     "module.dedup_table.table_name",
			"lambda_function_name": "module.worker.function_name",
		},
		customEffectRoot: {
			"dedup_table_name": "module.dedup_table.table_name",
			"ecs_cluster_name": "aws_ecs_cluster.this.name",
			"ecs_service_name": "module.worker.service_name",
		},
	} {
		m := load(t, dir)
		c := m.call(t, "alarms")
		for arg, ref := range want {
			require.Equal(t, ref, m.text(attr(t, c.Body, arg).Expr), "%s: alarms.%s", dir, arg)
		}
		require.Equal(t, "module.queue.queue_name", m.text(attr(t, c.Body, "queue_name").Expr), dir)
	}
	// The worker's table is the one the alarms watch.
	m := load(t, "modules/dedup-table")
	require.Equal(t, "aws_dynamodb_table.this.name", m.text(attr(t, m.outputs["table_name"].Body, "value").Expr))
}
