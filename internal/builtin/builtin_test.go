package builtin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

func TestLedgerRejectsBadBodiesAsPermanent(t *testing.T) {
	t.Parallel()
	l := &builtin.Ledger{Table: "ledger"}
	for _, body := range []string{
		``, `not json`, `[]`, `{"amount_cents":5}`, `{"account":"a"}`, `{"account":7,"amount_cents":5}`,
		`{"account":"a","amount_cents":2.5}`, `{"account":"a","amount_cents":"5"}`, `{"account":"a","amount_cents":5,"seq":-1}`,
	} {
		_, err := l.Apply(context.Background(), effect.Input{Message: effect.Message{Body: body}, Key: "k"})
		require.Error(t, err, body)
		require.True(t, effect.IsPermanent(err), "%q: %v", body, err)
	}
}

func TestLedgerWrites(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_123)
	l := &builtin.Ledger{Table: "ledger", Now: func() time.Time { return now }}
	out, err := l.Apply(context.Background(), effect.Input{
		Message: effect.Message{Body: `{"account":"a1","amount_cents":250,"seq":7}`, ID: "m1", Group: "g"}, Key: "ns#q#k",
	})
	require.NoError(t, err)
	require.Len(t, out.Writes, 2)
	up := out.Writes[0].Update
	require.Equal(t, "ADD balance_cents :amt, applied :one SET last_seq = :seq", *up.UpdateExpression)
	require.Equal(t, "attribute_not_exists(last_seq) OR last_seq < :seq", *up.ConditionExpression)
	require.Equal(t, "acct#a1", up.Key["pk"].(*types.AttributeValueMemberS).Value)
	put := out.Writes[1].Put
	require.Equal(t, "entry#ns#q#k", put.Item["pk"].(*types.AttributeValueMemberS).Value)
	require.Equal(t, "1700000000123", put.Item["applied_at"].(*types.AttributeValueMemberN).Value)
	require.Equal(t, "7", put.Item["seq"].(*types.AttributeValueMemberN).Value)

	// Without seq there is no order condition.
	out, err = l.Apply(context.Background(), effect.Input{Message: effect.Message{Body: `{"account":"a1","amount_cents":-5}`}, Key: "k2"})
	require.NoError(t, err)
	require.Nil(t, out.Writes[0].Update.ConditionExpression)
}

func newHTTP(t *testing.T, h http.HandlerFunc) *builtin.HTTP {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &builtin.HTTP{URL: srv.URL, Client: &http.Client{Timeout: 500 * time.Millisecond}}
}

func TestHTTPSendsKeyAndStoresResult(t *testing.T) {
	t.Parallel()
	var got http.Header
	var body string
	h := newHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay_1"}`))
	})
	out, err := h.Apply(context.Background(), effect.Input{Message: effect.Message{Body: `{"x":1}`, ID: "m1", Group: "g1"}, Key: "ns#q#k1"})
	require.NoError(t, err)
	require.Equal(t, `{"x":1}`, body)
	require.Equal(t, "ns#q#k1", got.Get("Idempotency-Key"))
	require.Equal(t, "g1", got.Get("X-Message-Group-Id"))
	require.Equal(t, "m1", got.Get("X-Message-Id"))
	require.JSONEq(t, `{"status":201,"body":"{\"id\":\"pay_1\"}"}`, string(out.Result))
}

// TestHTTPForwardsTheTrace: the effect's span context travels downstream
// as W3C traceparent; without one, no header.
func TestHTTPForwardsTheTrace(t *testing.T) {
	t.Parallel()
	var got []string
	h := newHTTP(t, func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get("traceparent")) })
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	in := effect.Input{Message: effect.Message{Body: "{}", ID: "m1"}, Key: "k"}
	_, err := h.Apply(ctx, in)
	require.NoError(t, err)
	_, err = h.Apply(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}, got)
}

func TestHTTPClassifiesFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status     int
		retryAfter string
		permanent  bool
		after      time.Duration
	}{
		{400, "", true, 0}, {404, "", true, 0}, {422, "", true, 0},
		{408, "", false, 0}, {429, "7", false, 7 * time.Second}, {500, "", false, 0}, {503, "2", false, 2 * time.Second},
		// IETF Idempotency-Key draft: 409 = the same key still in progress downstream.
		{409, "3", false, 3 * time.Second}, {425, "", false, 0},
		{401, "", false, 0}, {403, "", false, 0}, {410, "", true, 0},
	}
	for _, c := range cases {
		h := newHTTP(t, func(w http.ResponseWriter, r *http.Request) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.status)
		})
		_, err := h.Apply(context.Background(), effect.Input{Message: effect.Message{Body: "{}"}, Key: "k"})
		require.Error(t, err)
		require.Equal(t, c.permanent, effect.IsPermanent(err), "status %d", c.status)
		require.Equal(t, c.after, effect.RetryDelay(err), "status %d", c.status)
	}
	// A timeout is retryable.
	h := newHTTP(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) })
	_, err := h.Apply(context.Background(), effect.Input{Message: effect.Message{Body: "{}"}, Key: "k"})
	require.Error(t, err)
	require.False(t, effect.IsPermanent(err))
}

func TestErrorsUnwrap(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	require.ErrorIs(t, effect.Permanent(base), base)
	require.ErrorIs(t, effect.RetryAfter(time.Second, base), base)
	require.NoError(t, effect.Permanent(nil))
	require.False(t, effect.IsPermanent(base))
	require.Zero(t, effect.RetryDelay(base))
}

// TestLedgerConfirms: with Confirm, the ledger sends the entry's
// confirmation through the outbox: in the account's group, keyed by the
// entry's dedup key, with the entry's seq (so that a second ledger keeps
// the order).
func TestLedgerConfirms(t *testing.T) {
	l := &builtin.Ledger{Table: "ledger", Confirm: "http://q/confirmations.fifo"}
	out, err := l.Apply(context.Background(), effect.Input{Key: "ns#q#k1", Message: effect.Message{Body: `{"account":"a1","amount_cents":250,"seq":3}`}})
	require.NoError(t, err)
	require.Len(t, out.Writes, 2)
	require.Len(t, out.Send, 1)
	m := out.Send[0]
	require.Equal(t, "http://q/confirmations.fifo", m.QueueURL)
	require.Equal(t, "a1", m.Group)
	require.Equal(t, "ns#q#k1/confirmed", m.ID)
	require.JSONEq(t, `{"account":"a1","amount_cents":250,"seq":3,"confirms":"ns#q#k1"}`, m.Body)
	e, err := builtin.ParseLedgerEntry(m.Body)
	require.NoError(t, err, "a confirmation is a ledger entry")
	require.Equal(t, int64(3), *e.Seq)

	out, err = l.Apply(context.Background(), effect.Input{Key: strings.Repeat("k", 200), Message: effect.Message{Body: `{"account":"a1","amount_cents":1}`}})
	require.NoError(t, err)
	require.LessOrEqual(t, len(out.Send[0].ID), 128, "a long key still makes a valid id")

	// A topic's ARN: the confirmation goes to the topic, which fans it out.
	const topic = "arn:aws:sns:us-east-1:000000000000:confirmations.fifo"
	out, err = (&builtin.Ledger{Table: "ledger", Confirm: topic}).Apply(context.Background(), effect.Input{Key: "k2", Message: effect.Message{Body: `{"account":"a1","amount_cents":1}`}})
	require.NoError(t, err)
	require.Equal(t, topic, out.Send[0].TopicARN)
	require.Empty(t, out.Send[0].QueueURL, "one destination")

	out, err = (&builtin.Ledger{Table: "ledger"}).Apply(context.Background(), effect.Input{Key: "k", Message: effect.Message{Body: `{"account":"a1","amount_cents":1}`}})
	require.NoError(t, err)
	require.Empty(t, out.Send)
}
