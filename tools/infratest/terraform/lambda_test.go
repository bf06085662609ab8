package terraform_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// ---------------------------------------------------------------------------
// modules/worker-lambda: batching, filters, the mapping's metrics, tracing

const testStandardQueueARN = "arn:aws:sqs:eu-west-1:123456789012:exactly-standard"

// xrayActions are what Lambda's active tracing sends with the function's role.
var xrayActions = []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}

// TestWorkerLambdaBatchingPreconditions evaluates the event source mapping's
// preconditions: a FIFO queue takes at most 10 per batch and no batching
// window; a standard queue takes up to 10000, above 10 only with a window.
func TestWorkerLambdaBatchingPreconditions(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	// failing are the error messages of the preconditions that fail.
	failing := func(arn string, batch, window int64) []string {
		t.Helper()
		vars := lambdaVars(t, m, map[string]cty.Value{"batch_size": num(batch), "maximum_batching_window_in_seconds": num(window)})
		require.True(t, m.valid(t, "batch_size", num(batch)), "batch %d fails its validation", batch)
		require.True(t, m.valid(t, "maximum_batching_window_in_seconds", num(window)), "window %d fails its validation", window)
		s := scope{
			"var": vars,
			"each": {"key": str("q"), "value": cty.ObjectVal(map[string]cty.Value{
				"arn": str(arn), "visibility_timeout_seconds": num(180), "max_receive_count": cty.NullVal(cty.Number),
			})},
		}
		var out []string
		for _, p := range nestedBlock(t, esm.Body, "lifecycle").Body.Blocks {
			if p.Type == "precondition" && !eval(t, attr(t, p.Body, "condition").Expr, s).True() {
				out = append(out, literal(t, attr(t, p.Body, "error_message").Expr).AsString())
			}
		}
		return out
	}
	const (
		fifoBatch  = "A FIFO queue takes batch_size of at most 10"
		fifoWindow = "A FIFO queue takes no batching window"
		needWindow = "batch_size above 10 needs maximum_batching_window_in_seconds"
	)
	requireFails := func(got []string, prefix string) {
		t.Helper()
		for _, msg := range got {
			if strings.HasPrefix(msg, prefix) {
				return
			}
		}
		t.Fatalf("want the precondition %q to fail; failing: %q", prefix, got)
	}
	require.Empty(t, failing(testQueueARN, fifoMaxBatchSize, 0))
	require.Empty(t, failing(testQueueARN, 1, 0))
	requireFails(failing(testQueueARN, fifoMaxBatchSize+1, 1), fifoBatch)
	requireFails(failing(testQueueARN, fifoMaxBatchSize+1, 0), fifoBatch)
	requireFails(failing(testQueueARN, 5, 1), fifoWindow)

	require.Empty(t, failing(testStandardQueueARN, fifoMaxBatchSize, 0))
	require.Empty(t, failing(testStandardQueueARN, 5, 20), "standard: a window with a small batch")
	require.Empty(t, failing(testStandardQueueARN, 10000, 1))
	requireFails(failing(testStandardQueueARN, fifoMaxBatchSize+1, 0), needWindow)
	requireFails(failing(testStandardQueueARN, 10000, 0), needWindow)

	require.False(t, m.valid(t, "batch_size", num(10001)), "SQS batches hold at most 10000")
	require.False(t, m.valid(t, "batch_size", num(0)))
	require.False(t, m.valid(t, "maximum_batching_window_in_seconds", num(301)), "the window is at most 300 s")
	require.False(t, m.valid(t, "maximum_batching_window_in_seconds", num(-1)))
}

// dynamicBlock is the one dynamic block of that type in a body.
func dynamicBlock(t *testing.T, body *hclsyntax.Body, blockType string) *hclsyntax.Block {
	t.Helper()
	var found []*hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == "dynamic" && b.Labels[0] == blockType {
			found = append(found, b)
		}
	}
	require.Len(t, found, 1, "want exactly one dynamic %q block", blockType)
	return found[0]
}

// filterPatterns evaluates the mapping's filter_criteria blocks: the
// patterns of each filter_criteria block made.
func filterPatterns(t *testing.T, esm *hclsyntax.Block, vars map[string]cty.Value) [][]string {
	t.Helper()
	var out [][]string
	eachDynamic(t, dynamicBlock(t, esm.Body, "filter_criteria"), scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
		var patterns []string
		eachDynamic(t, dynamicBlock(t, content, "filter"), inner, func(filter *hclsyntax.Body, s scope) {
			patterns = append(patterns, eval(t, attr(t, filter, "pattern").Expr, s).AsString())
		})
		out = append(out, patterns)
	})
	return out
}

func TestWorkerLambdaFilterCriteria(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")

	require.Empty(t, filterPatterns(t, esm, lambdaVars(t, m, nil)), "no filter by default: a filter deletes what it does not match")
	patterns := []string{`{"body":{"type":["deposit"]}}`, `{"attributes":{"MessageGroupId":[{"prefix":"acct"}]}}`}
	got := filterPatterns(t, esm, lambdaVars(t, m, map[string]cty.Value{"filter_patterns": strList(patterns...)}))
	require.Equal(t, [][]string{patterns}, got, "one filter_criteria block with every pattern, in order")

	require.True(t, m.valid(t, "filter_patterns", strList(patterns...)))
	require.False(t, m.valid(t, "filter_patterns", strList(`{"body":`)), "a pattern must be JSON")
	six := []string{"{}", "{}", "{}", "{}", "{}", "{}"}
	require.True(t, m.valid(t, "filter_patterns", strList(six[:5]...)))
	require.False(t, m.valid(t, "filter_patterns", strList(six...)), "at most 5 filters per mapping")
}

func TestWorkerLambdaMappingMetrics(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	metrics := func(vars map[string]cty.Value) [][]string {
		var out [][]string
		eachDynamic(t, dynamicBlock(t, esm.Body, "metrics_config"), scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
			out = append(out, stringList(t, eval(t, attr(t, content, "metrics").Expr, inner)))
		})
		return out
	}
	require.Equal(t, [][]string{{"EventCount"}}, metrics(lambdaVars(t, m, nil)), "the mapping's metrics are on by default")
	require.Empty(t, metrics(lambdaVars(t, m, map[string]cty.Value{"event_source_mapping_metrics": strList()})))
	require.False(t, m.valid(t, "event_source_mapping_metrics", strList("ErrorCount")), "ErrorCount is for Kafka sources")
}

func TestWorkerLambdaTracing(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	fn := m.resource(t, "aws_lambda_function.this")
	require.Equal(t, "var.tracing_mode", m.text(attr(t, fn.Body, "tracing_config", "mode").Expr))
	require.Equal(t, "PassThrough", m.defaults(t)["tracing_mode"].AsString())
	require.True(t, m.valid(t, "tracing_mode", str("Active")))
	require.False(t, m.valid(t, "tracing_mode", str("active")), "Lambda's modes are case-sensitive")

	policy := func(mode string) map[string]docStatement {
		vars := lambdaVars(t, m, map[string]cty.Value{"tracing_mode": str(mode)})
		out := map[string]docStatement{}
		for _, st := range policyStatements(t, m.dataSource(t, "aws_iam_policy_document.this"), scope{
			"var": vars, "local": m.evalLocals(vars),
			"aws_cloudwatch_log_group": {"this": cty.ObjectVal(map[string]cty.Value{"arn": str(testLogGroupARN)})},
		}) {
			out[st.Sid] = st
		}
		return out
	}
	require.NotContains(t, policy("PassThrough"), "Tracing", "no X-Ray grant without active tracing")
	active := policy("Active")
	require.Contains(t, active, "Tracing", "active tracing needs the role to send segments")
	require.Equal(t, "Allow", active["Tracing"].Effect)
	require.ElementsMatch(t, xrayActions, active["Tracing"].Actions)
	require.Equal(t, []string{"*"}, active["Tracing"].Resources, "X-Ray's two calls take no narrower resource")
	// Every other statement is what it is without tracing.
	delete(active, "Tracing")
	without := policy("PassThrough")
	require.Len(t, active, len(without))
	for sid, st := range without {
		require.Equal(t, st.Actions, active[sid].Actions, sid)
		require.Equal(t, st.Resources, active[sid].Resources, sid)
	}
}

// TestWorkerLambdaProvisionedPollers: the mapping's provisioned mode is off
// by default (Lambda's standard scaling, capped by maximum_concurrency), and
// with provisioned_pollers it carries the given minimum and maximum and no
// maximum concurrency (Lambda takes one or the other); AWS's ranges for SQS
// are enforced.
func TestWorkerLambdaProvisionedPollers(t *testing.T) {
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	blocks := func(vars map[string]cty.Value) (concurrency []int64, pollers [][2]int64) {
		eachDynamic(t, dynamicBlock(t, esm.Body, "scaling_config"), scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
			concurrency = append(concurrency, asInt(eval(t, attr(t, content, "maximum_concurrency").Expr, inner)))
		})
		eachDynamic(t, dynamicBlock(t, esm.Body, "provisioned_poller_config"), scope{"var": vars}, func(content *hclsyntax.Body, inner scope) {
			pollers = append(pollers, [2]int64{
				asInt(eval(t, attr(t, content, "minimum_pollers").Expr, inner)),
				asInt(eval(t, attr(t, content, "maximum_pollers").Expr, inner)),
			})
		})
		return concurrency, pollers
	}
	require.True(t, m.defaults(t)["provisioned_pollers"].IsNull(), "provisioned mode is billed: off by default")
	c, p := blocks(lambdaVars(t, m, map[string]cty.Value{"maximum_concurrency": num(7)}))
	require.Equal(t, []int64{7}, c, "standard scaling: the mapping's maximum concurrency")
	require.Empty(t, p)

	pollers := func(lo, hi int64) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"minimum_pollers": num(lo), "maximum_pollers": num(hi)})
	}
	c, p = blocks(lambdaVars(t, m, map[string]cty.Value{"provisioned_pollers": pollers(3, 50)}))
	require.Empty(t, c, "no maximum concurrency in provisioned mode")
	require.Equal(t, [][2]int64{{3, 50}}, p)

	require.True(t, m.valid(t, "provisioned_pollers", cty.NullVal(pollers(2, 2).Type())))
	require.True(t, m.valid(t, "provisioned_pollers", pollers(2, 200)), "Lambda's defaults")
	require.True(t, m.valid(t, "provisioned_pollers", pollers(200, 10000)), "the top of both ranges")
	require.False(t, m.valid(t, "provisioned_pollers", pollers(1, 200)), "SQS needs at least 2 pollers")
	require.False(t, m.valid(t, "provisioned_pollers", pollers(201, 300)), "a minimum above 200")
	require.False(t, m.valid(t, "provisioned_pollers", pollers(2, 10001)), "a maximum above 10000")
	require.False(t, m.valid(t, "provisioned_pollers", pollers(10, 5)), "a minimum above the maximum")
	require.False(t, m.valid(t, "provisioned_pollers", cty.ObjectVal(map[string]cty.Value{"minimum_pollers": cty.NumberFloatVal(2.5), "maximum_pollers": num(10)})), "whole numbers")
}
