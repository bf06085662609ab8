package redrive_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// slowSQS takes latency for every ReceiveMessage, as a DLQ read across a
// slow link does, and counts the calls and the largest visibility batch.
type slowSQS struct {
	*memsqs.Server
	latency  time.Duration
	receives int
}

func (s *slowSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.receives++
	time.Sleep(s.latency)
	return s.Server.ReceiveMessage(ctx, in, opts...)
}

// TestRedriveEndsOnADLQTooLargeForItsVisibility: the messages a redrive
// leaves in the DLQ (too new, of groups not asked for, listed by a dry run)
// are hidden only for its visibility. When reading them all takes longer,
// the first ones are visible again before the last are read. Before the
// fix they were received, held and counted again, no receive came back
// empty and Run never ended. Now Run ends when a receive brings no message
// it has not seen, counts and lists each message once, and leaves every
// message in the DLQ, visible when it ends.
func TestRedriveEndsOnADLQTooLargeForItsVisibility(t *testing.T) {
	t.Parallel()
	const n = 120
	for _, tc := range []struct {
		name string
		cfg  func(before time.Time) redrive.Config
		// counted is what the result counts of the messages it saw.
		counted func(redrive.Result) int
	}{
		{"too new", func(before time.Time) redrive.Config { return redrive.Config{Before: before} },
			func(r redrive.Result) int { return r.Left }},
		{"groups not asked for", func(time.Time) redrive.Config { return redrive.Config{Groups: []string{"none"}} },
			func(r redrive.Result) int { return r.Skipped }},
		{"dry run", func(time.Time) redrive.Config { return redrive.Config{DryRun: true} },
			func(r redrive.Result) int { return len(r.Listed) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := &slowSQS{Server: memsqs.New()}
				url, dlq := testenv.NewQueue(t, c, true, nil, 3)
				before := time.Now()
				time.Sleep(time.Millisecond)
				for i := range n {
					id := fmt.Sprintf("m%03d", i)
					sendFIFO(t, c, dlq, fmt.Sprintf("g%d", i), id, id, nil)
				}
				time.Sleep(time.Millisecond)
				// Twelve receives of ten, a second each, against a
				// visibility of five seconds.
				c.latency = time.Second
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				cfg := tc.cfg(before)
				cfg.DLQ, cfg.Queue, cfg.Wait, cfg.Visibility = dlq, url, time.Second, 5*time.Second
				res, err := redrive.Run(ctx, c, cfg)
				require.NoError(t, err, "the redrive ends by itself, well within the hour")
				require.Zero(t, res.Moved)
				got := tc.counted(res)
				require.Positive(t, got)
				require.LessOrEqual(t, got, n, "no message counted twice")
				require.Less(t, c.receives, 3*n/10, "it stops receiving once the messages it left come back")
				seen := map[string]bool{}
				for _, l := range res.Listed {
					require.False(t, seen[l.ID], "message %s listed twice", l.ID)
					seen[l.ID] = true
				}

				c.latency = 0
				require.Len(t, drain(t, c, dlq), n, "every message stays in the DLQ, visible at once")
				require.Empty(t, drain(t, c, url))
			})
		})
	}
}

// omitSQS answers a SendMessageBatch without a word about the entry whose
// body is omit: neither successful nor failed (it is not sent).
type omitSQS struct {
	*memsqs.Server
	omit string
}

func (o *omitSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var pass []types.SendMessageBatchRequestEntry
	for _, e := range in.Entries {
		if aws.ToString(e.MessageBody) != o.omit {
			pass = append(pass, e)
		}
	}
	if len(pass) == 0 {
		return &sqs.SendMessageBatchOutput{}, nil
	}
	return o.Server.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: pass}, opts...)
}

// TestRedriveStopsAGroupAtAnEntryTheAnswerDoesNotName: SQS's answer to a
// SendMessageBatch names an entry neither as sent nor as failed. Before the
// fix the entry was passed over in silence: the later messages of its group
// were copied and deleted ahead of it, and Run reported success. Now such
// an entry has failed: it and the rest of its group stay in the DLQ, in
// order, other groups move, and Run's error names it.
func TestRedriveStopsAGroupAtAnEntryTheAnswerDoesNotName(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{true, false} {
		t.Run(map[bool]string{true: "fifo", false: "standard"}[fifo], func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := &omitSQS{Server: memsqs.New(), omit: "A2"}
				url, dlq := testenv.NewQueue(t, c, fifo, nil, 3)
				var a2 string
				for _, m := range [][2]string{{"A", "A1"}, {"A", "A2"}, {"B", "B1"}, {"A", "A3"}} {
					if fifo {
						sendFIFO(t, c, dlq, m[0], m[1], m[1], nil)
						continue
					}
					out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(m[1])})
					require.NoError(t, err)
					if m[1] == "A2" {
						a2 = aws.ToString(out.MessageId)
					}
				}
				time.Sleep(time.Millisecond)

				res, err := redrive.Run(context.Background(), c, redrive.Config{DLQ: dlq, Queue: url, Wait: time.Second, Visibility: 10 * time.Second})
				require.Error(t, err, "an entry SQS did not answer for has not moved")
				require.Contains(t, err.Error(), "no result")
				if !fifo {
					require.Contains(t, err.Error(), a2, "the error names the message")
					require.Equal(t, 3, res.Moved)
					time.Sleep(10 * time.Second)
					require.Len(t, drain(t, c, dlq), 1, "A2 stays in the DLQ")
					return
				}
				require.Equal(t, 2, res.Moved, "A1 and B1")
				require.Equal(t, map[string][]string{"A": {"A1"}, "B": {"B1"}}, bodiesOf(t, c, url), "nothing of group A passed the unanswered entry")
				time.Sleep(10 * time.Second)
				require.Equal(t, map[string][]string{"A": {"A2", "A3"}}, bodiesOf(t, c, dlq), "it and the rest of its group stay, in order")
			})
		})
	}
}
