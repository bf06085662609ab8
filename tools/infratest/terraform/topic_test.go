package terraform_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// ---------------------------------------------------------------------------
// modules/topic: an SNS topic in front of queues, for fan-out

const (
	testTopicARN     = "arn:aws:sns:eu-west-1:123456789012:exactly-orders.fifo"
	testAuditARN     = "arn:aws:sqs:eu-west-1:123456789012:exactly-audit.fifo"
	testAuditURL     = "https://sqs.eu-west-1.amazonaws.com/123456789012/exactly-audit.fifo"
	testConfirmedURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/exactly-demo.fifo"
)

// topicQueue is one entry of the topic module's queues, with its optional
// attributes spelt out (the tests evaluate without Terraform's type
// conversion, which would fill them in).
func topicQueue(arn, url string, raw bool, filter cty.Value, ownPolicy bool) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"arn": str(arn), "url": str(url), "raw_message_delivery": cty.BoolVal(raw),
		"filter_policy": filter, "filter_policy_scope": str("MessageAttributes"), "write_queue_policy": cty.BoolVal(ownPolicy),
	})
}

func topicQueues() cty.Value {
	return cty.MapVal(map[string]cty.Value{
		"confirmed": topicQueue(testQueueARN, testConfirmedURL, true, nullString(), false),
		"audit":     topicQueue(testAuditARN, testAuditURL, false, str(`{"kind":["deposit"]}`), true),
	})
}

func topicScope(t *testing.T, m *module, extra map[string]cty.Value) scope {
	t.Helper()
	vars := map[string]cty.Value{"name": str("exactly-orders"), "queues": topicQueues()}
	for k, v := range extra {
		vars[k] = v
	}
	vars = m.withVars(t, vars)
	return scope{
		"var": vars, "local": m.evalLocals(vars),
		"aws_sns_topic": {"this": cty.ObjectVal(map[string]cty.Value{"arn": str(testTopicARN)})},
	}
}

// forEachOf evaluates a resource's for_each: its keys and values.
func forEachOf(t *testing.T, m *module, key string, s scope) map[string]cty.Value {
	t.Helper()
	out := map[string]cty.Value{}
	b, ok := m.data[strings.TrimPrefix(key, "data.")]
	if !ok {
		b = m.resource(t, key)
	}
	v := eval(t, attr(t, b.Body, "for_each").Expr, s)
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		out[k.AsString()] = e
	}
	return out
}

// TestTopicIsFIFOWithoutContentBasedDeduplication: the topic is FIFO by
// default, named with .fifo, content-based deduplication off (and null on
// a standard topic, which refuses the attribute), encrypted at rest.
func TestTopicIsFIFOWithoutContentBasedDeduplication(t *testing.T) {
	m := load(t, "modules/topic")
	topic := m.resource(t, "aws_sns_topic.this")
	require.True(t, m.defaults(t)["fifo_topic"].True(), "FIFO by default: the groups' order reaches the queues")
	require.Equal(t, "local.topic_name", m.text(attr(t, topic.Body, "name").Expr))
	require.Equal(t, "var.fifo_topic", m.text(attr(t, topic.Body, "fifo_topic").Expr))

	fifo := topicScope(t, m, nil)
	require.Equal(t, "exactly-orders.fifo", fifo["local"]["topic_name"].AsString())
	cbd := eval(t, attr(t, topic.Body, "content_based_deduplication").Expr, fifo)
	require.False(t, cbd.IsNull())
	require.False(t, cbd.True(), "content-based deduplication is off: the relay sends a deduplication id")
	for name := range m.variables {
		require.NotContains(t, name, "content_based", "content-based deduplication is not a setting")
	}

	std := topicScope(t, m, map[string]cty.Value{"fifo_topic": cty.False})
	require.Equal(t, "exactly-orders", std["local"]["topic_name"].AsString())
	require.True(t, eval(t, attr(t, topic.Body, "content_based_deduplication").Expr, std).IsNull(), "a standard topic takes no FIFO attribute")

	require.Equal(t, "var.kms_master_key_id", m.text(attr(t, topic.Body, "kms_master_key_id").Expr))
	require.Equal(t, "alias/aws/sns", m.defaults(t)["kms_master_key_id"].AsString(), "encrypted at rest by default")
	require.False(t, m.valid(t, "kms_master_key_id", nullString()), "encryption at rest cannot be turned off")
	require.False(t, m.valid(t, "kms_master_key_id", str("")))

	require.True(t, m.valid(t, "name", str("exactly-orders")))
	require.False(t, m.valid(t, "name", str("exactly-orders.fifo")), "the module adds .fifo")
	require.False(t, m.valid(t, "name", str(strings.Repeat("a", 252))), "256 characters with .fifo")
}

// TestTopicSubscriptionsAsDeclared: one sqs subscription per queue, its raw
// delivery and filter policy as the queue declares them, and a standard
// topic refused in front of a FIFO queue.
func TestTopicSubscriptionsAsDeclared(t *testing.T) {
	m := load(t, "modules/topic")
	sub := m.resource(t, "aws_sns_topic_subscription.this")
	s := topicScope(t, m, nil)
	subs := forEachOf(t, m, "aws_sns_topic_subscription.this", s)
	require.Len(t, subs, 2, "one subscription per queue")
	require.Equal(t, "sqs", literal(t, attr(t, sub.Body, "protocol").Expr).AsString())
	require.Equal(t, "aws_sns_topic.this.arn", m.text(attr(t, sub.Body, "topic_arn").Expr))

	type got struct {
		endpoint, scope string
		raw             bool
		filter          cty.Value
	}
	each := func(key string, s scope) got {
		inner := scope{"each": {"key": str(key), "value": subs[key]}}
		for k, v := range s {
			inner[k] = v
		}
		scopeV := eval(t, attr(t, sub.Body, "filter_policy_scope").Expr, inner)
		g := got{
			endpoint: eval(t, attr(t, sub.Body, "endpoint").Expr, inner).AsString(),
			raw:      eval(t, attr(t, sub.Body, "raw_message_delivery").Expr, inner).True(),
			filter:   eval(t, attr(t, sub.Body, "filter_policy").Expr, inner),
		}
		if !scopeV.IsNull() {
			g.scope = scopeV.AsString()
		}
		return g
	}
	confirmed, audit := each("confirmed", s), each("audit", s)
	require.Equal(t, testQueueARN, confirmed.endpoint)
	require.True(t, confirmed.raw, "raw delivery as declared")
	require.True(t, confirmed.filter.IsNull(), "no filter unless given")
	require.Empty(t, confirmed.scope, "no filter scope without a filter")
	require.Equal(t, testAuditARN, audit.endpoint)
	require.False(t, audit.raw, "raw delivery off as declared: the envelope")
	require.JSONEq(t, `{"kind":["deposit"]}`, audit.filter.AsString())
	require.Equal(t, "MessageAttributes", audit.scope)

	// A standard topic cannot deliver to a FIFO queue; to a standard one it can.
	std := topicScope(t, m, map[string]cty.Value{"fifo_topic": cty.False})
	std["each"] = map[string]cty.Value{"key": str("audit"), "value": subs["audit"]}
	require.False(t, preconditions(t, sub, std), "a standard topic in front of a FIFO queue")
	std["each"] = map[string]cty.Value{"key": str("std"), "value": topicQueue(testStandardQueueARN, testAuditURL, true, nullString(), false)}
	require.True(t, preconditions(t, sub, std))
	fifo := topicScope(t, m, nil)
	fifo["each"] = map[string]cty.Value{"key": str("audit"), "value": subs["audit"]}
	require.True(t, preconditions(t, sub, fifo))

	bad := func(q cty.Value) bool {
		return m.valid(t, "queues", cty.MapVal(map[string]cty.Value{"q": q}))
	}
	require.True(t, bad(topicQueue(testQueueARN, testConfirmedURL, true, nullString(), false)))
	require.False(t, bad(topicQueue(testConfirmedURL, testConfirmedURL, true, nullString(), false)), "an ARN, not a URL")
	require.False(t, bad(topicQueue(testQueueARN, testConfirmedURL, true, str(`{"kind":`), false)), "a filter policy is JSON")
	require.False(t, m.valid(t, "queues", cty.MapValEmpty(topicQueues().Type().ElementType())), "at least one queue")
}

// TestTopicMaySendToItsQueuesOnly: each queue's statement lets only this
// topic send, only to that queue; the module writes a queue's policy only
// where the queue declares it has no other (the queue module's own policy
// would be overwritten), and hands out every statement for the queue
// module's source_queue_policy_documents.
func TestTopicMaySendToItsQueuesOnly(t *testing.T) {
	m := load(t, "modules/topic")
	s := topicScope(t, m, nil)
	doc := m.dataSource(t, "aws_iam_policy_document.queue")
	docs := forEachOf(t, m, "data.aws_iam_policy_document.queue", s)
	require.Len(t, docs, 2, "a statement for every queue")
	for key, q := range docs {
		inner := scope{"each": {"key": str(key), "value": q}}
		for k, v := range s {
			inner[k] = v
		}
		sts := policyStatements(t, doc, inner)
		require.Len(t, sts, 1, key)
		st := sts[0]
		require.Equal(t, "Allow", st.Effect)
		require.Equal(t, []string{"sqs:SendMessage"}, st.Actions, "%s: SendMessage only", key)
		require.Equal(t, []string{q.GetAttr("arn").AsString()}, st.Resources, "%s: this queue only", key)
		require.Equal(t, map[string][]string{"Service": {"sns.amazonaws.com"}}, st.Principals, key)
		require.Equal(t, map[string][]string{"ArnEquals aws:SourceArn": {testTopicARN}}, st.Conditions, "%s: this topic only", key)
	}

	own := forEachOf(t, m, "aws_sqs_queue_policy.this", s)
	require.Equal(t, []string{"audit"}, keysOf(own), "a policy written only where the queue declares write_queue_policy")
	qp := m.resource(t, "aws_sqs_queue_policy.this")
	require.Equal(t, "each.value.url", m.text(attr(t, qp.Body, "queue_url").Expr))
	require.Equal(t, "data.aws_iam_policy_document.queue[each.key].json", m.text(attr(t, qp.Body, "policy").Expr))

	out := m.text(attr(t, m.outputs["queue_policy_documents"].Body, "value").Expr)
	require.Contains(t, out, "data.aws_iam_policy_document.queue", "the statements for the queue module")
	for file, src := range m.src {
		require.NotContains(t, string(src), `"sqs:*"`, file)
		require.NotContains(t, string(src), `"sns:*"`, file)
		require.NotContains(t, string(src), `identifiers = ["*"]`, "%s: no anonymous principal", file)
	}
}

func keysOf(m map[string]cty.Value) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestExampleWiresTheTopic: examples/ecs, with enable_fanout, subscribes the
// demo queue to the topic, merges the topic's grant into the queue module's
// policy (not a second policy that would overwrite it), and lets the relay
// publish to the topic.
func TestExampleWiresTheTopic(t *testing.T) {
	m := load(t, "examples/ecs")
	topic := m.call(t, "topic")
	require.Equal(t, "local.fanout ? 1 : 0", m.text(attr(t, topic.Body, "count").Expr))
	require.Equal(t, "var.enable_outbox && var.enable_fanout", m.text(m.locals["fanout"].Expr), "the topic only with its relay")
	queues := m.text(attr(t, topic.Body, "queues").Expr)
	require.Contains(t, queues, "module.queue.queue_arn")
	require.Contains(t, queues, "module.queue.queue_url")
	require.Contains(t, m.text(attr(t, m.call(t, "queue").Body, "source_queue_policy_documents").Expr), `module.topic[0].queue_policy_documents["demo"]`)
	require.NotContains(t, queues, "write_queue_policy", "the queue module owns the demo queue's policy")
	require.Equal(t, "local.fanout ? [module.topic[0].topic_arn] : []", m.text(attr(t, m.call(t, "relay").Body, "topic_arns").Expr))
}
