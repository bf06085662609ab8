package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// baseline is the comparison consumer: plain aws-sdk-go-v2 clients with
// their defaults and conc goroutines that each loop receive one message
// (ReceiveMessage, MaxNumberOfMessages 1, 20 s long poll), apply the same
// effect naively, delete one (DeleteMessage). With the ledger effect, the
// effect is the ledger's own writes (account update and entry) in one
// TransactWriteItems: what a careful at-least-once consumer does, with no
// dedup record, no claim and no lease. A message whose effect fails is left
// to come back after its visibility timeout.
type baseline struct {
	c      *clients
	url    string
	ledger *builtin.Ledger // nil: noop

	applied  atomic.Int64
	received atomic.Int64
	failed   atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func startBaseline(ctx context.Context, url, ledgerTable, effName string, conc int) (*baseline, error) {
	c, err := newClients(ctx, 0)
	if err != nil {
		return nil, err
	}
	b := &baseline{c: c, url: url}
	if effName == "ledger" {
		b.ledger = &builtin.Ledger{Table: ledgerTable}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancel = cancel
	for range conc {
		b.wg.Go(func() { b.loop(rctx) })
	}
	return b, nil
}

func (b *baseline) loop(ctx context.Context) {
	for ctx.Err() == nil {
		out, err := b.c.sqs.ReceiveMessage(ctx, receiveInput(b.url, 1, 20))
		if err != nil {
			if ctx.Err() == nil {
				b.failed.Add(1)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		b.received.Add(int64(len(out.Messages)))
		for _, m := range out.Messages {
			// Work started is finished: only receiving stops on cancel.
			wctx := context.WithoutCancel(ctx)
			if b.ledger != nil {
				msg := sqsmsg.ToMessage(b.url, m)
				o, err := b.ledger.Apply(wctx, effect.Input{Message: msg, Key: msg.DedupID})
				if err == nil {
					_, err = b.c.db.TransactWriteItems(wctx, &dynamodb.TransactWriteItemsInput{TransactItems: o.Writes})
				}
				if err != nil {
					b.failed.Add(1)
					continue
				}
			}
			if _, err := b.c.sqs.DeleteMessage(wctx, &sqs.DeleteMessageInput{QueueUrl: &b.url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				b.failed.Add(1)
				continue
			}
			b.applied.Add(1)
		}
	}
}

func (b *baseline) sample(context.Context) (Sample, error) {
	s := newSample(time.Now())
	s.Counts["applied"] = float64(b.applied.Load())
	s.Counts["received"] = float64(b.received.Load())
	s.Counts["failed"] = float64(b.failed.Load())
	s.Counts["dynamodb_wru"] = float64(b.c.reqs.WriteUnitsTotal())
	for k, v := range b.c.reqs.Snapshot() {
		s.Requests[k] = float64(v)
	}
	return s, nil
}

func (b *baseline) stop() {
	b.cancel()
	b.wg.Wait()
	b.c.close()
}
