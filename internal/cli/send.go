package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/process"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// outgoing is one message to send; it is also the line format of --ndjson:
// {"group":"a1","dedup_id":"d1","key":"k1","body":{"account":"a1","amount_cents":250}}
// body may be a JSON string (sent as is) or any JSON value (sent as its text).
type outgoing struct {
	Group   string          `json:"group"`
	DedupID string          `json:"dedup_id"`
	Key     string          `json:"key"`
	Body    json.RawMessage `json:"body"`
}

func (o outgoing) bodyText() (string, error) {
	if len(o.Body) == 0 {
		return "", fmt.Errorf("no body")
	}
	var s string
	if json.Unmarshal(o.Body, &s) == nil {
		return s, nil
	}
	return string(o.Body), nil
}

func sendCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var (
		queue, ndjson string
		one           outgoing
		body          string
	)
	fs := config.NewSet("worker send", stderr, lookup)
	fs.String(&queue, "queue", "", "", "queue URL (required)")
	fs.String(&one.Group, "group", "", "", "MessageGroupId (required for FIFO queues)")
	fs.String(&one.DedupID, "dedup-id", "", "", "MessageDeduplicationId (FIFO; default: the SHA-256 of the body)")
	fs.String(&one.Key, "key", "", "", "idempotency-key message attribute (survives SQS's five-minute window)")
	fs.String(&body, "body", "", "", "message body")
	fs.String(&ndjson, "ndjson", "", "", "file of messages, one JSON object a line: group, dedup_id, key, body ('-' for stdin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if queue == "" {
		return config.Errorf("--queue is required")
	}
	var msgs []outgoing
	switch {
	case ndjson != "" && body != "":
		return config.Errorf("give --body or --ndjson, not both")
	case ndjson != "":
		var err error
		if msgs, err = readNDJSON(ndjson); err != nil {
			return config.Errorf("--ndjson %s: %v", ndjson, err)
		}
	case body != "":
		one.Body, _ = json.Marshal(body)
		msgs = []outgoing{one}
	default:
		return config.Errorf("give --body or --ndjson")
	}
	fifo := sqsmsg.IsFIFO(queue)
	for i, m := range msgs {
		if fifo && m.Group == "" {
			return config.Errorf("message %d: a FIFO queue needs a group (--group)", i+1)
		}
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	tp, err := tracing(ctx, lookup)
	if err != nil {
		return err
	}
	var tracer trace.Tracer = noop.NewTracerProvider().Tracer("")
	if tp != nil {
		defer shutdownTracing(tp, slog.New(slog.NewTextHandler(stderr, nil)))
		tracer = tp.Tracer(process.TracerName)
	}
	sent := 0
	for start := 0; start < len(msgs); start += 10 {
		batch := msgs[start:min(start+10, len(msgs))]
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
		spans := make([]trace.Span, len(batch))
		for i, m := range batch {
			text, err := m.bodyText()
			if err != nil {
				return config.Errorf("message %d: %v", start+i+1, err)
			}
			e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(text)}
			if fifo {
				e.MessageGroupId = aws.String(m.Group)
				dedupID := m.DedupID
				if dedupID == "" {
					dedupID = dedup.PayloadHash(text)
				}
				e.MessageDeduplicationId = aws.String(dedupID)
			}
			e.MessageAttributes = map[string]sqstypes.MessageAttributeValue{}
			if m.Key != "" {
				e.MessageAttributes[dedup.IdempotencyKeyAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.Key)}
			}
			// With tracing on, each message starts a trace that the worker's
			// span continues: a producer span, its traceparent an attribute.
			var sctx context.Context
			sctx, spans[i] = tracer.Start(ctx, "send "+sqsmsg.QueueName(queue), trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(semconv.MessagingSystemAWSSQS, semconv.MessagingOperationTypeSend, semconv.MessagingDestinationName(sqsmsg.QueueName(queue))))
			carrier := propagation.MapCarrier{}
			propagation.TraceContext{}.Inject(sctx, carrier)
			for k, v := range carrier {
				e.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
			if len(e.MessageAttributes) == 0 {
				e.MessageAttributes = nil
			}
			entries[i] = e
		}
		out, err := cl.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &queue, Entries: entries})
		for _, sp := range spans {
			sp.End()
		}
		if err != nil {
			return fmt.Errorf("cannot send to %s after %d messages: %w", queue, sent, err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("cannot send %d of %d messages to %s: %s: %s", len(out.Failed), len(batch), queue, aws.ToString(f.Code), aws.ToString(f.Message))
		}
		sent += len(out.Successful)
	}
	fmt.Fprintf(stdout, "sent %d messages to %s\n", sent, sqsmsg.QueueName(queue))
	return nil
}

func readNDJSON(path string) ([]outgoing, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path) //nolint:gosec // the operator names the file to send
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }() // opened for reading
		r = f
	}
	var out []outgoing
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var m outgoing
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
