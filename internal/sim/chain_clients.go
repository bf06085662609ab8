package sim

import (
	"context"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// cproc is one incarnation of a process of the chain: its calls go through
// the injector; once dead, every call fails before reaching the fakes.
type cproc struct {
	id     string
	c      *chain
	dead   atomic.Bool
	kill   func()
	unread unreadKeys // limits.go
}

func (p *cproc) name() string          { return p.id }
func (p *cproc) injector() *Injector   { return p.c.inj }
func (p *cproc) isDead() bool          { return p.dead.Load() }
func (p *cproc) faulting(string, Kind) {}
func (p *cproc) sequencer() *sequencer { return p.c.seq }

func (p *cproc) die(why string) {
	if p.dead.Swap(true) {
		return
	}
	p.c.stat("chain: died ("+strings.SplitN(why, " ", 3)[0]+" "+strings.SplitN(why, " ", 3)[1]+")", 1)
	p.kill()
}

func (p *cproc) before(ctx context.Context, op, subject string) (Kind, string, error) {
	return before(ctx, p, op, subject)
}

func (p *cproc) after(ctx context.Context, op string, k Kind, id string) error {
	return after(ctx, p, op, k, id)
}

func (p *cproc) seed() uint64            { return p.c.cfg.Seed }
func (p *cproc) nextRead() int64         { return p.c.reads.Add(1) }
func (p *cproc) stat(name string, n int) { p.c.stat(name, n) }
func (p *cproc) unreadKeys() *unreadKeys { return &p.unread }
func (p *cproc) violate(format string, args ...any) {
	p.c.violate(format, args...)
}

// dynProc is a process whose DynamoDB calls cDynamo runs through the
// injector: the chain's (cproc) or the world's outbox half's (proc).
type dynProc interface {
	faulted
	before(ctx context.Context, op, subject string) (Kind, string, error)
	after(ctx context.Context, op string, k Kind, id string) error
	seed() uint64
	nextRead() int64 // counts reads of outbox items (staleMarks)
	stat(name string, n int)
	violate(format string, args ...any)
	unreadKeys() *unreadKeys
}

// call runs one call through the injector: before, the call, after.
func call[T any](ctx context.Context, p dynProc, op, subject string, f func() (T, error)) (T, error) {
	var zero T
	k, id, err := p.before(ctx, op, subject)
	if err != nil {
		return zero, err
	}
	out, err := f()
	if err != nil {
		return zero, err
	}
	if err := p.after(ctx, op, k, id); err != nil {
		return zero, err
	}
	return out, nil
}

// cDynamo is a process's DynamoDB client.
type cDynamo struct {
	p     dynProc
	inner *memdynamo.DB
}

var _ outbox.API = (*cDynamo)(nil)

func keyStr(key map[string]ddbtypes.AttributeValue) string {
	s := ""
	for _, k := range []string{"pk", "sk"} {
		switch v := key[k].(type) {
		case *ddbtypes.AttributeValueMemberS:
			s += v.Value + "/"
		case *ddbtypes.AttributeValueMemberN:
			s += v.Value + "/"
		}
	}
	return s
}

func (c *cDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(ctx, c.p, "GetItem", aws.ToString(in.TableName)+"|"+keyStr(in.Key), func() (*dynamodb.GetItemOutput, error) { return c.inner.GetItem(ctx, in, opt...) })
}

func (c *cDynamo) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	subject := ""
	for table, ka := range in.RequestItems {
		subject = table
		if len(ka.Keys) > 0 {
			subject += "|" + keyStr(ka.Keys[0])
		}
	}
	var asked []string
	for _, ka := range in.RequestItems {
		for _, key := range ka.Keys {
			asked = append(asked, keyStr(key))
		}
	}
	depth := c.p.unreadKeys().asked(asked)
	k, id, err := c.p.before(ctx, "BatchGetItem", subject)
	if err != nil {
		return nil, err
	}
	keys := len(asked)
	out, err := c.inner.BatchGetItem(ctx, in, opt...)
	if err != nil {
		obRead(c.p, "BatchGetItem", keys, 0, 0, false)
		return nil, err
	}
	obRead(c.p, "BatchGetItem", keys, 0, 0, len(out.UnprocessedKeys) > 0)
	if k == Partial {
		// Some keys left unprocessed (throttled), as DynamoDB may.
		for table, items := range out.Responses {
			var kept []map[string]ddbtypes.AttributeValue
			var left []map[string]ddbtypes.AttributeValue
			for _, it := range items {
				if c.p.injector().entryFails(id, keyStr(it)) {
					left = append(left, map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
					continue
				}
				kept = append(kept, it)
			}
			out.Responses[table] = kept
			if len(left) > 0 {
				if out.UnprocessedKeys == nil {
					out.UnprocessedKeys = map[string]ddbtypes.KeysAndAttributes{}
				}
				// Besides those DynamoDB itself left (past 16 MB).
				un := out.UnprocessedKeys[table]
				un.Keys, un.ConsistentRead = append(un.Keys, left...), in.RequestItems[table].ConsistentRead
				out.UnprocessedKeys[table] = un
				c.p.stat("outbox: BatchGetItem keys left unprocessed", len(left))
			}
		}
	}
	if err := c.p.after(ctx, "BatchGetItem", k, id); err != nil {
		return nil, err
	}
	var left []string
	for _, ka := range out.UnprocessedKeys {
		for _, key := range ka.Keys {
			left = append(left, keyStr(key))
		}
	}
	c.p.unreadKeys().left(left, depth)
	if err == nil {
		for _, items := range out.Responses {
			c.staleMarks(subject, items)
		}
	}
	return out, err
}

// staleMarks shows some outbox messages as they were before the relay's
// transaction that marked them published: a read of items is
// read-committed per item, so one that meets that transaction may see
// some of its items before and others after. A seeded half of the reads
// that hold marked messages show one of them unmarked.
func (c *cDynamo) staleMarks(subject string, items []map[string]ddbtypes.AttributeValue) {
	var marked []int
	for i, it := range items {
		if _, ok := it[outboxschema.AttrSentAt]; ok {
			marked = append(marked, i)
		}
	}
	if len(marked) == 0 {
		return
	}
	h := hash64(c.p.seed(), "stale", subject, c.p.name(), strconv.Itoa(int(c.p.nextRead())))
	if h%2 == 0 {
		return
	}
	i := marked[int(h>>8)%len(marked)]
	stale := maps.Clone(items[i])
	delete(stale, outboxschema.AttrSentAt)
	delete(stale, outboxschema.AttrTTL)
	items[i] = stale
	c.p.stat("outbox: reads showing a marked message unmarked", 1)
}

func (c *cDynamo) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	subject := aws.ToString(in.TableName) + "|" + aws.ToString(in.IndexName)
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok {
			subject += "|" + s.Value
		}
	}
	out, err := call(ctx, c.p, "Query", subject, func() (*dynamodb.QueryOutput, error) { return c.inner.Query(ctx, in, opt...) })
	if err == nil && in.IndexName != nil {
		c.p.unreadKeys().sweep()
	}
	if pk, ok := in.ExpressionAttributeValues[":pk"].(*ddbtypes.AttributeValueMemberS); ok && err == nil && in.IndexName == nil && c.p.unreadKeys().waiting(pk.Value) {
		c.p.violate("outbox: %s read group %s by Query while keys of it a BatchGetItem left unprocessed were not asked for again (UnprocessedKeys dropped)", c.p.name(), pk.Value)
	}
	if err == nil && in.IndexName == nil {
		obRead(c.p, "Query", 0, aws.ToInt32(in.Limit), len(out.Items), len(out.LastEvaluatedKey) > 0)
		c.staleMarks(subject, out.Items)
	}
	return out, err
}

func (c *cDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(ctx, c.p, "PutItem", aws.ToString(in.TableName)+"|"+keyStr(in.Item), func() (*dynamodb.PutItemOutput, error) { return c.inner.PutItem(ctx, in, opt...) })
}

func (c *cDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(ctx, c.p, "UpdateItem", aws.ToString(in.TableName)+"|"+keyStr(in.Key), func() (*dynamodb.UpdateItemOutput, error) { return c.inner.UpdateItem(ctx, in, opt...) })
}

func (c *cDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(ctx, c.p, "DeleteItem", aws.ToString(in.TableName)+"|"+keyStr(in.Key), func() (*dynamodb.DeleteItemOutput, error) { return c.inner.DeleteItem(ctx, in, opt...) })
}

func (c *cDynamo) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	subject := ""
	if len(in.TransactItems) > 0 {
		switch it := in.TransactItems[0]; {
		case it.Put != nil:
			subject = aws.ToString(it.Put.TableName) + "|" + keyStr(it.Put.Item)
		case it.Update != nil:
			subject = aws.ToString(it.Update.TableName) + "|" + keyStr(it.Update.Key)
		}
	}
	if p, ok := c.p.(*cproc); ok {
		p.c.limRequest(p, in)
	}
	k, id, err := c.p.before(ctx, "TransactWriteItems", subject)
	if k == Conflict {
		return nil, conflictCancel(len(in.TransactItems))
	}
	if err != nil {
		return nil, err
	}
	out, err := c.inner.TransactWriteItems(ctx, in, opt...)
	if err != nil {
		return nil, err
	}
	if err := c.p.after(ctx, "TransactWriteItems", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *cDynamo) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opt ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.inner.DescribeTable(ctx, in, opt...)
}

func (c *cDynamo) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opt ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return c.inner.DescribeTimeToLive(ctx, in, opt...)
}

// cSQS is a process's SQS client.
type cSQS struct {
	p     *cproc
	inner *memsqs.Server
}

var (
	_ pool.SQS   = (*cSQS)(nil)
	_ outbox.SQS = (*cSQS)(nil)
)

func (c *cSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opt ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	k, id, err := c.p.before(ctx, "ReceiveMessage", sqsmsg.QueueName(aws.ToString(in.QueueUrl))+"|"+c.p.id)
	if err != nil {
		return nil, err
	}
	// A long poll that wakes steps under the call's own identity (sequencer.go).
	out, err := c.inner.ReceiveMessage(withCallID(ctx, c.p.id, "ReceiveMessage", id), in, opt...)
	if err != nil {
		return nil, err
	}
	if err := c.p.after(ctx, "ReceiveMessage", k, id); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *cSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return call(ctx, c.p, "DeleteMessage", receiptID(aws.ToString(in.ReceiptHandle)), func() (*sqs.DeleteMessageOutput, error) { return c.inner.DeleteMessage(ctx, in, opt...) })
}

func (c *cSQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return call(ctx, c.p, "ChangeMessageVisibility", receiptID(aws.ToString(in.ReceiptHandle)), func() (*sqs.ChangeMessageVisibilityOutput, error) {
		return c.inner.ChangeMessageVisibility(ctx, in, opt...)
	})
}

func (c *cSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opt ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return c.inner.GetQueueAttributes(ctx, in, opt...)
}

func (c *cSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opt ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) { //nolint:revive // the SDK's name
	return c.inner.GetQueueUrl(ctx, in, opt...)
}

func (c *cSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return call(ctx, c.p, "SendMessage", sqsmsg.QueueName(aws.ToString(in.QueueUrl))+"|"+aws.ToString(in.MessageDeduplicationId), func() (*sqs.SendMessageOutput, error) {
		out, err := c.inner.SendMessage(ctx, in, opt...)
		if err == nil {
			c.p.c.judgeDeadLetter(c.p, aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody))
		}
		return out, err
	})
}

// batch runs a batch call through the injector; a Partial fault fails some
// entries (retryably) while the others go through.
//
// keyOf names an entry to the injector by what it carries, not by its
// place: the product builds some batches in an order no seed fixes (lanes
// stopped at one instant hand their messages back in the runtime's order),
// and which entry fails must not depend on it.
func batch[E any, O any](ctx context.Context, c *cSQS, op, subject string, entries []E, idOf, keyOf func(E) string, do func([]E) (O, []types.BatchResultErrorEntry, error), failed func(O, []types.BatchResultErrorEntry) O) (O, error) {
	var zero O
	k, id, err := c.p.before(ctx, op, subject)
	if err != nil {
		return zero, err
	}
	var keep []E
	var fails []types.BatchResultErrorEntry
	for _, e := range entries {
		if k == Partial && c.p.c.inj.entryFails(id, keyOf(e)) {
			fails = append(fails, types.BatchResultErrorEntry{Id: aws.String(idOf(e)), Code: aws.String("InternalError"), Message: aws.String("sim: entry failed")})
			continue
		}
		keep = append(keep, e)
	}
	out, more, err := do(keep)
	if err != nil {
		return zero, err
	}
	out = failed(out, append(more, fails...))
	if err := c.p.after(ctx, op, k, id); err != nil {
		return zero, err
	}
	return out, nil
}

func (c *cSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	subject := sqsmsg.QueueName(aws.ToString(in.QueueUrl))
	if len(in.Entries) > 0 {
		subject += "|" + aws.ToString(in.Entries[0].MessageDeduplicationId)
	}
	id := func(e types.SendMessageBatchRequestEntry) string { return aws.ToString(e.Id) } // the relay's order is its outbox's
	return batch(ctx, c, "SendMessageBatch", subject, in.Entries, id, id,
		func(es []types.SendMessageBatchRequestEntry) (*sqs.SendMessageBatchOutput, []types.BatchResultErrorEntry, error) {
			if len(es) == 0 {
				return &sqs.SendMessageBatchOutput{}, nil, nil
			}
			call := *in
			call.Entries = es
			out, err := c.inner.SendMessageBatch(ctx, &call, opt...)
			if err != nil {
				return nil, nil, err
			}
			sent := map[string]bool{}
			for _, ok := range out.Successful {
				sent[aws.ToString(ok.Id)] = true
			}
			var bodies []string
			for _, e := range es {
				if sent[aws.ToString(e.Id)] {
					bodies = append(bodies, aws.ToString(e.MessageBody))
				}
			}
			c.p.c.judgeDeadLetter(c.p, aws.ToString(in.QueueUrl), bodies...)
			return out, out.Failed, nil
		},
		func(o *sqs.SendMessageBatchOutput, f []types.BatchResultErrorEntry) *sqs.SendMessageBatchOutput {
			o.Failed = f
			return o
		})
}

func (c *cSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	receipt := func(e types.DeleteMessageBatchRequestEntry) string { return receiptID(aws.ToString(e.ReceiptHandle)) }
	return batch(ctx, c, "DeleteMessageBatch", leastEntry(in.QueueUrl, in.Entries, receipt), in.Entries,
		func(e types.DeleteMessageBatchRequestEntry) string { return aws.ToString(e.Id) }, receipt,
		func(es []types.DeleteMessageBatchRequestEntry) (*sqs.DeleteMessageBatchOutput, []types.BatchResultErrorEntry, error) {
			if len(es) == 0 {
				return &sqs.DeleteMessageBatchOutput{}, nil, nil
			}
			call := *in
			call.Entries = es
			out, err := c.inner.DeleteMessageBatch(ctx, &call, opt...)
			if err != nil {
				return nil, nil, err
			}
			return out, out.Failed, nil
		},
		func(o *sqs.DeleteMessageBatchOutput, f []types.BatchResultErrorEntry) *sqs.DeleteMessageBatchOutput {
			o.Failed = f
			return o
		})
}

// leastEntry names a batch call by its queue and the least of its entries'
// keys (batch's keyOf), whatever their order.
func leastEntry[E any](url *string, entries []E, key func(E) string) string {
	subject := sqsmsg.QueueName(aws.ToString(url))
	if len(entries) == 0 {
		return subject
	}
	least := key(entries[0])
	for _, e := range entries[1:] {
		least = min(least, key(e))
	}
	return subject + "|" + least
}

func (c *cSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	receipt := func(e types.ChangeMessageVisibilityBatchRequestEntry) string {
		return receiptID(aws.ToString(e.ReceiptHandle))
	}
	return batch(ctx, c, "ChangeMessageVisibilityBatch", leastEntry(in.QueueUrl, in.Entries, receipt), in.Entries,
		func(e types.ChangeMessageVisibilityBatchRequestEntry) string { return aws.ToString(e.Id) }, receipt,
		func(es []types.ChangeMessageVisibilityBatchRequestEntry) (*sqs.ChangeMessageVisibilityBatchOutput, []types.BatchResultErrorEntry, error) {
			if len(es) == 0 {
				return &sqs.ChangeMessageVisibilityBatchOutput{}, nil, nil
			}
			call := *in
			call.Entries = es
			out, err := c.inner.ChangeMessageVisibilityBatch(ctx, &call, opt...)
			if err != nil {
				return nil, nil, err
			}
			return out, out.Failed, nil
		},
		func(o *sqs.ChangeMessageVisibilityBatchOutput, f []types.BatchResultErrorEntry) *sqs.ChangeMessageVisibilityBatchOutput {
			o.Failed = f
			return o
		})
}
