package terraform_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// The redrive rule for Lambda on a FIFO queue: every hand-back of a message
// a batch could not start spends one of its receives, so a queue's
// maxReceiveCount must be above the event source mapping's batch size, or
// the redrive policy can dead-letter a message that never ran
// (internal/sqsevent/redrive.go, docs/DEPLOY.md).

const redriveRule = "A FIFO queue's max_receive_count must be above batch_size"

// lambdaESMFailing returns the error messages of the event source mapping's
// preconditions that fail for a queue and a batch size.
func lambdaESMFailing(t *testing.T, arn string, batch int64, maxReceive cty.Value) []string {
	t.Helper()
	m := load(t, "modules/worker-lambda")
	esm := m.resource(t, "aws_lambda_event_source_mapping.this")
	s := scope{
		"var": lambdaVars(t, m, map[string]cty.Value{"batch_size": num(batch)}),
		"each": {"key": str("q"), "value": cty.ObjectVal(map[string]cty.Value{
			"arn": str(arn), "visibility_timeout_seconds": num(180), "max_receive_count": maxReceive,
		})},
	}
	var out []string
	for _, p := range nestedBlock(t, esm.Body, "lifecycle").Body.Blocks {
		if p.Type == "precondition" && !eval(t, attr(t, p.Body, "condition").Expr, s).True() {
			out = append(out, literal(t, attr(t, p.Body, "error_message").Expr).AsString()[:len(redriveRule)])
		}
	}
	return out
}

func TestWorkerLambdaRedrivePrecondition(t *testing.T) {
	const standard = "arn:aws:sqs:eu-west-1:123456789012:exactly-demo"
	require.Empty(t, lambdaESMFailing(t, testQueueARN, 10, num(11)))
	require.Equal(t, []string{redriveRule}, lambdaESMFailing(t, testQueueARN, 10, num(10)), "maxReceiveCount = batch size")
	require.Equal(t, []string{redriveRule}, lambdaESMFailing(t, testQueueARN, 10, num(5)))
	require.Empty(t, lambdaESMFailing(t, testQueueARN, 4, num(5)))
	require.Empty(t, lambdaESMFailing(t, testQueueARN, 10, cty.NullVal(cty.Number)), "not known: not checked")
	require.Empty(t, lambdaESMFailing(t, standard, 10, num(5)), "a standard queue holds no message behind another")
}

// TestShippedDefaultsKeepTheRedriveRule: the queue module's default
// maxReceiveCount with the worker-lambda module's default batch size, and
// the Lambda example's queue and batch, pass the rule; and the queue
// module's worker_queue output carries the limit to the precondition.
func TestShippedDefaultsKeepTheRedriveRule(t *testing.T) {
	queue, worker := load(t, "modules/queue"), load(t, "modules/worker-lambda")
	defMax, defBatch := queue.defaults(t)["max_receive_count"], worker.defaults(t)["batch_size"]
	require.Empty(t, lambdaESMFailing(t, testQueueARN, asInt(defBatch), defMax), "module defaults")

	out := objectKeys(t, attr(t, queue.outputs["worker_queue"].Body, "value").Expr)
	require.Equal(t, "var.create_dlq ? var.max_receive_count : null", queue.text(out["max_receive_count"]))

	ex := load(t, "examples/lambda")
	s := scope{"var": ex.defaults(t)}
	exMax := eval(t, attr(t, ex.call(t, "queue").Body, "max_receive_count").Expr, s)
	exBatch := eval(t, attr(t, ex.call(t, "worker").Body, "batch_size").Expr, s)
	require.Empty(t, lambdaESMFailing(t, testQueueARN, asInt(exBatch), exMax), "examples/lambda")
}
