package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/outbox"
)

// SQS's message limits other than size on the chain's producer path
// (issue 19; sqslimits.go has them in the outbox half): in the chain's
// limit seeds the limiter also writes, to the limits queue, one message
// per class of chainEdges, each alone in its group "e<k>..." (its group
// name is the class's own when the class is about groups):
//   - at and just under a limit: 9 and 8 caller attributes (10 and 9 at
//     SQS with the relay's idempotency-key), ids and groups of 128 and
//     127 characters and of the punctuation SQS takes: committed once,
//     published once, and the copy in the queue carries its group and
//     its caller's attributes as written;
//   - just over: 10 caller attributes, an id or group of 129 characters,
//     one holding a space or a character past ASCII, an attribute name SQS
//     refuses, an empty value: Write returns ErrInvalid before any
//     request, nothing of it written, nothing published.

// chainEdge is one class of the edge load.
type chainEdge struct {
	group, id string
	attrs     map[string]string
	why       string
	refused   bool
}

// chainEdges is the edge load, the same in every limit seed.
func chainEdges() []chainEdge {
	return []chainEdge{
		{group: padTo("e0-", 128), id: "e0", why: "a group of 128 characters"},
		{group: padTo("e1-", 127), id: padTo("e1-", 128), why: "a group of 127 characters and an id of 128"},
		{group: "e2", id: padTo("e2-", 127), attrs: edgeAttrs(2, sqsAttributes-1), why: "9 caller attributes (10 at SQS) and an id of 127"},
		{group: `e3/#"\~`, id: `e3!~"\/#`, attrs: edgeAttrs(3, sqsAttributes-2), why: "8 caller attributes, an id and a group of punctuation"},
		{group: "e4", id: "e4", attrs: edgeAttrs(4, sqsAttributes), why: "10 caller attributes (11 at SQS)", refused: true},
		{group: padTo("e5-", 129), id: "e5", why: "a group of 129 characters", refused: true},
		{group: "e6", id: padTo("e6-", 129), why: "an id of 129 characters", refused: true},
		{group: "e7", id: "e7 x", why: "an id holding a space", refused: true},
		{group: "e8é", id: "e8", why: "a group holding a character past ASCII", refused: true},
		{group: "e9", id: "e9", attrs: map[string]string{"ok": "1", "AWS.x": "v"}, why: `an attribute named "AWS.x"`, refused: true},
		{group: "e10", id: "e10", attrs: map[string]string{"ok": "1", "empty": ""}, why: "an attribute with an empty value", refused: true},
	}
}

// edgeTag is class k's tag: its marker's key is limTagPK(tag, 0).
func edgeTag(k int) string { return fmt.Sprint("e", k) }

// edgeBody is class k's body.
func edgeBody(k int) string { return fmt.Sprintf("edge %d", k) }

// limitEdges writes the edge load; false when the incarnation ended first.
func (c *chain) limitEdges(ctx context.Context, p *cproc, ob *outbox.Outbox) bool {
	for k, e := range chainEdges() {
		tag := edgeTag(k)
		marker := ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(chainBusiness),
			Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: limTagPK(tag, 0)}}}}
		m := []outbox.Message{{QueueURL: c.urls[chainLimQueue], Group: e.group, Body: edgeBody(k), ID: e.id, Attributes: e.attrs}}
		if !c.limWrite(ctx, p, ob, m, []ddbtypes.TransactWriteItem{marker}, tag, e.refused) {
			return false
		}
	}
	return true
}

// checkEdges verifies the edge load's outcome against what the limits
// queue held (ms) and the TransactWriteItems that carried each class.
func (c *chain) checkEdges(ctx context.Context, ms []types.Message, reqs map[string]int) {
	copies := map[string][]types.Message{}
	for _, m := range ms {
		copies[aws.ToString(m.Body)] = append(copies[aws.ToString(m.Body)], m)
	}
	for k, e := range chainEdges() {
		tag := edgeTag(k)
		marker := c.get(ctx, chainBusiness, limTagPK(tag, 0)) != nil
		got := copies[edgeBody(k)]
		if e.refused {
			if marker || len(got) > 0 || reqs[tag] > 0 {
				c.violate("limits: the producer's Write of %s (%s) is past SQS's limits: its write exists %v, %d copies published, %d TransactWriteItems carried it", tag, e.why, marker, len(got), reqs[tag])
			}
			c.checkPublished(ctx, chainLimQueue, e.group, 0)
			continue
		}
		if !marker || len(got) == 0 {
			c.violate("limits: the producer's Write of %s (%s) within SQS's limits: its write exists %v, %d copies published", tag, e.why, marker, len(got))
		}
		for _, m := range got {
			attrs := map[string]string{}
			for name, v := range m.MessageAttributes {
				if name != outbox.IdempotencyKeyAttribute {
					attrs[name] = aws.ToString(v.StringValue)
				}
			}
			g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			if key := aws.ToString(m.MessageAttributes[outbox.IdempotencyKeyAttribute].StringValue); g != e.group || key != outbox.Key(e.group, e.id) || !maps.Equal(attrs, e.attrs) {
				c.violate("limits: %s (%s) reached the queue in group %q, key %q, attributes %v; written in group %q, id %q, attributes %v",
					tag, e.why, g, key, slices.Sorted(maps.Keys(attrs)), e.group, e.id, slices.Sorted(maps.Keys(e.attrs)))
			}
		}
		c.checkPublished(ctx, chainLimQueue, e.group, 1)
		c.stat("limits: chain edge published ("+strings.SplitN(e.why, " (", 2)[0]+")", 1)
	}
}
