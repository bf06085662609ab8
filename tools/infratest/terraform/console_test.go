package terraform_test

import (
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/exactlyonce/exactly/internal/console"
)

const testDLQARN = "arn:aws:sqs:eu-west-1:123456789012:exactly-demo-dlq.fifo"

// consoleCalls maps the methods of the console's clients (console.SQS and
// console.DB, what its pages and writes may call) to the IAM actions they
// need; "" for a method the console never calls (outbox.API's
// BatchGetItem is the producers').
var consoleCalls = map[string]string{
	"GetQueueAttributes": "sqs:GetQueueAttributes", "GetQueueUrl": "sqs:GetQueueUrl",
	"ReceiveMessage": "sqs:ReceiveMessage", "ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
	"SendMessageBatch": "sqs:SendMessage", "DeleteMessageBatch": "sqs:DeleteMessage",
	"GetItem": "dynamodb:GetItem", "Scan": "dynamodb:Scan", "DeleteItem": "dynamodb:DeleteItem", "Query": "dynamodb:Query",
	"DescribeTable": "dynamodb:DescribeTable", "DescribeTimeToLive": "dynamodb:DescribeTimeToLive",
	"TransactWriteItems": "dynamodb:UpdateItem", // release and drop: transactions of Updates only
	"BatchGetItem":       "",
}

// consoleWrites are the actions only a console started with --write calls.
var consoleWrites = []string{"dynamodb:DeleteItem", "dynamodb:UpdateItem", "sqs:DeleteMessage", "sqs:SendMessage"}

// TestConsolePolicies: the read-write policy holds exactly the actions of
// the console's clients, each on its resources; the read-only one the
// same less the writes; without DLQs or an outbox, no statement for them.
func TestConsolePolicies(t *testing.T) {
	var want []string
	for _, iface := range []reflect.Type{reflect.TypeFor[console.SQS](), reflect.TypeFor[console.DB]()} {
		for i := range iface.NumMethod() {
			a, ok := consoleCalls[iface.Method(i).Name]
			require.True(t, ok, "the console's clients call %s: map it to its IAM action", iface.Method(i).Name)
			if a != "" && !slices.Contains(want, a) {
				want = append(want, a)
			}
		}
	}
	sort.Strings(want)

	m := load(t, "modules/operator-policy")
	vars := m.withVars(t, map[string]cty.Value{"dedup_table_arn": str(testTableARN), "queue_arns": strList(testQueueARN),
		"dlq_arns": strList(testDLQARN), "outbox_table_arn": str(testOutboxTableARN)})
	s := scope{"var": vars, "local": m.evalLocals(vars)}
	actions := func(sts []docStatement) []string {
		var out []string
		for _, st := range sts {
			out = append(out, st.Actions...)
		}
		sort.Strings(out)
		return dedupe(out)
	}
	write := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.console_write"), s)
	read := policyStatements(t, m.dataSource(t, "aws_iam_policy_document.console_read"), s)
	require.Equal(t, want, actions(write), "the read-write policy: exactly what the console calls")
	var wantRead []string
	for _, a := range want {
		if !slices.Contains(consoleWrites, a) {
			wantRead = append(wantRead, a)
		}
	}
	require.Equal(t, wantRead, actions(read), "the read-only policy: no write")

	res := map[string][]string{}
	for _, st := range write {
		res[st.Sid] = st.Resources
	}
	require.Equal(t, map[string][]string{
		"ConsoleRecords":       {testTableARN},
		"ConsoleQueues":        {testQueueARN, testDLQARN},
		"ConsoleDeadLetters":   {testDLQARN},
		"ConsoleOutbox":        {testOutboxTableARN, testOutboxTableARN + "/index/*"},
		"ConsoleForget":        {testTableARN},
		"ConsoleRedriveSend":   {testQueueARN},
		"ConsoleRedriveDelete": {testDLQARN},
		"ConsoleOutboxRelease": {testOutboxTableARN},
	}, res)

	// Without DLQs or an outbox: no statement for them, none empty.
	vars = m.withVars(t, map[string]cty.Value{"dedup_table_arn": str(testTableARN)})
	s = scope{"var": vars, "local": m.evalLocals(vars)}
	sids := func(sts []docStatement) []string {
		var out []string
		for _, st := range sts {
			require.NotEmpty(t, st.Resources, st.Sid)
			out = append(out, st.Sid)
		}
		return out
	}
	require.Equal(t, []string{"ConsoleRecords"}, sids(policyStatements(t, m.dataSource(t, "aws_iam_policy_document.console_read"), s)))
	require.Equal(t, []string{"ConsoleRecords", "ConsoleForget"}, sids(policyStatements(t, m.dataSource(t, "aws_iam_policy_document.console_write"), s)))

	// Optional, and each policy is its own document.
	for _, key := range []string{"aws_iam_policy.console_read", "aws_iam_policy.console_write"} {
		require.Equal(t, "var.create_console_policies ? 1 : 0", m.text(attr(t, m.resource(t, key).Body, "count").Expr), key)
	}
	require.Equal(t, "data.aws_iam_policy_document.console_read[0].json", m.text(attr(t, m.resource(t, "aws_iam_policy.console_read").Body, "policy").Expr))
	require.Equal(t, "data.aws_iam_policy_document.console_write[0].json", m.text(attr(t, m.resource(t, "aws_iam_policy.console_write").Body, "policy").Expr))
	require.False(t, m.valid(t, "dlq_arns", strList("https://sqs.eu-west-1.amazonaws.com/123456789012/q-dlq")), "queue ARNs, not URLs")
}
