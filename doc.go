// Package exactly turns SQS's at-least-once delivery into exactly-once
// effects. A [Worker] long-polls SQS queues (FIFO and standard), keeps each
// message group in order while running many groups in parallel, and runs
// each logical message's effect once, whatever SQS redelivers and whatever a
// producer resends, by claiming the message's dedup key in a DynamoDB ledger
// (conditional writes, a TTL, leases with fencing tokens). A message is
// deleted only after its effect and its dedup record have committed. A
// [LambdaHandler] does the same for the SQS events of a Lambda event source
// mapping.
//
// The package reads no environment and no flags, opens no listener and
// registers no metrics unless given a registry: the worker command
// (cmd/worker) is one client of it, your service can be another.
//
// # Getting started
//
// Add the module, and give a [Config] the AWS clients, the queues, the dedup
// table (partition key pk of type S, TTL on expires_at) and the effect:
//
//	go get github.com/exactlyonce/exactly
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	if err != nil {
//		return err
//	}
//	w, err := exactly.New(ctx, exactly.Config{
//		SQS:      sqs.NewFromConfig(cfg),
//		DynamoDB: exactly.NewDynamoDBClient(cfg),
//		Queues:   []string{ordersQueueURL},
//		Table:    "exactly-dedup",
//		Effect:   effect.Func(ship),
//	})
//	if err != nil {
//		return err // a *ConfigError naming the setting and the fix
//	}
//	return w.Run(ctx) // until ctx ends, then drains
//
// Every other field of [Config] has a default, stated on the field. [New]
// checks everything before anything runs: the settings, each queue's
// attributes, the table's key and TTL, and (without side effects) the
// permissions. Each problem is a [*ConfigError] naming the field.
//
// # Effects
//
// An effect is what runs once per logical message: anything implementing
// effect.Effect, or a plain func through effect.Func. It gets the message
// and its dedup key, and returns a result that is stored with the record
// and replayed for duplicates (at most 16 KiB):
//
//	func ship(ctx context.Context, in effect.Input) (effect.Output, error) {
//		req, _ := http.NewRequestWithContext(ctx, "POST", shippingURL, strings.NewReader(in.Message.Body))
//		req.Header.Set("Idempotency-Key", in.Key) // a repeat is the same request
//		resp, err := http.DefaultClient.Do(req)
//		if err != nil {
//			return effect.Output{}, err // retried with backoff
//		}
//		defer resp.Body.Close()
//		if resp.StatusCode == http.StatusBadRequest {
//			return effect.Output{}, effect.Permanent(errors.New(resp.Status)) // to the DLQ
//		}
//		return effect.Output{Result: []byte(`{"shipped":true}`)}, nil
//	}
//
// An error is retried (in place a few times, then back to SQS with
// backoff); effect.Permanent sends the message to the queue's dead-letter
// queue at once; effect.RetryAfter asks for a delay. An effect whose call
// goes outside DynamoDB may, in a few documented windows (a worker that
// dies or stalls between its call and the commit), run a second time: that
// is why it passes in.Key downstream as its idempotency key.
//
// # Effects that are DynamoDB writes
//
// An effect whose whole effect is DynamoDB writes returns them instead of
// making them, in effect.Output.Writes: they commit in one TransactWriteItems
// with the dedup record, so they are applied exactly once whatever fails.
// Mark it with effect.WritesFunc (or effect.WritesOnly) and it commits
// optimistically by default: no claim, one DynamoDB request per message.
// [Config].Commit picks another [CommitMode] ([CommitClaim],
// [CommitTransactional], [CommitOptimistic]); [Config].GroupCommit lets
// concurrent optimistic commits share a transaction. A commit that cannot fit
// one transaction (more than 100 items with the record, an item over
// 400 KB, 4 MB in all)
// fails permanently before any request.
//
// # Dedup keys and payloads
//
// A message's dedup key comes from [Config].KeySource: "auto" (its
// idempotency-key attribute, else its MessageDeduplicationId, else its
// MessageId), "attr:NAME", "json:/pointer" or "body"; or from
// [Config].KeyFunc in Go. Keys are scoped by [Config].Namespace and the
// queue, and by the message group when the queue deduplicates per group.
// A key completed for a different payload is a conflict: never run, never
// acknowledged, sent to the DLQ. [Config].PayloadHash says what of a
// message counts as its payload. A completed key suppresses duplicates for
// [Config].TTL (24 hours by default).
//
// # Stopping
//
// [Worker.Run] returns once the worker has drained after its context ends:
// receiving stops, running effects finish within [Config].ShutdownTimeout,
// received but unstarted messages go back to SQS at once, deletes are
// flushed, and open long polls return (within [Config].WaitTime). [Worker.Stop]
// does the same from another goroutine and waits; [Worker.StopAndCancel]
// cancels the running effects and abandons the open polls: wire it to a
// second Ctrl-C.
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	go func() {
//		<-ctx.Done() // the first signal: Run drains
//		again := make(chan os.Signal, 1)
//		signal.Notify(again, os.Interrupt)
//		<-again // the second: cancel what runs
//		_ = w.StopAndCancel(context.Background())
//	}()
//	err := w.Run(ctx)
//
// # Lambda
//
// [NewLambdaHandler] builds a handler from the same [Config] ([LambdaConfig]
// holds its own settings); pass its [LambdaHandler.Handle] to lambda.Start,
// and turn on ReportBatchItemFailures on the event source mapping. A failed
// message of a FIFO queue takes the rest of its group in the batch with it.
//
// # Sending messages: the outbox
//
// An effect may also announce something: messages returned in
// effect.Output.Send commit through [Config].Outbox in the same transaction
// as the message's record, and a relay publishes them in order per group
// (package outbox, `worker relay`). Workers that send this way chain
// exactly-once. A service outside any worker writes to the outbox with
// outbox.Outbox.Write.
//
// # Watching it
//
// [Config].Hooks is told what came of each message ([Done]);
// [Worker.Stats] gives running counts. [Config].Registerer registers the
// Prometheus collectors (exactly_*), [Config].EMF writes CloudWatch Embedded
// Metric Format lines, [Config].TracerProvider traces each message with
// OpenTelemetry, and [Config].Logger receives the logs (slog.Default() if
// nil).
//
// # Testing
//
// Package exactlytest runs an effect through the real exactly-once path on
// an in-memory DynamoDB, and a whole Worker on an in-memory SQS too, with no
// AWS and no emulator:
//
//	h := exactlytest.New(t, effect.Func(ship), exactlytest.KeySource("json:/order"))
//	h.RequireApplied(exactlytest.Msg(`{"order":"o-1"}`))
//	h.RequireDuplicate(exactlytest.Msg(`{"order":"o-1"}`))
//
// Under testing/synctest a Worker's leases and long polls cost no wall time.
//
// # Without SQS
//
// Package idempotency makes any Go function exactly-once per key on the same
// ledger (idempotency.Wrap, idempotency.WrapTx), and an HTTP API idempotent
// at its edge (idempotency.Middleware, per the IETF Idempotency-Key draft).
//
// # Further reading
//
// In the repository: docs/DESIGN.md states the guarantees with their failure
// windows, the record, the commit modes and every AWS limit; docs/LIBRARY.md
// walks through the library; docs/OUTBOX.md, docs/OPERATE.md and
// docs/DEPLOY.md cover the rest.
package exactly
