// Package redrive moves messages from a dead-letter queue back to the queue
// they came from, keeping what makes them the same logical messages: body,
// message attributes, group, and the dedup key (an idempotency-key attribute
// set to what the auto key source read, when the message has none). Each
// copy gets a fresh MessageDeduplicationId derived from this receive of the
// dead-letter message (CopyDeduplicationID), so that SQS's five-minute
// window drops neither the replay of a message sent moments ago nor a
// second move of a dead-letter message whose earlier copy was consumed and
// failed again.
package redrive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// SQS is the part of the SQS client a redrive uses.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Config of one redrive.
type Config struct {
	DLQ   string // URL of the dead-letter queue to empty
	Queue string // URL of the queue to send to: the one the messages came from
	// Max moves at most this many messages; 0 moves until the DLQ is empty.
	Max int
	// Visibility hides a received message while it is copied (default 60s).
	Visibility time.Duration
	// Wait is the long-poll wait; a receive that waits this long and gets
	// nothing ends the redrive (default 2s).
	Wait time.Duration
	// Before: only messages that reached the dead-letter queue before it are
	// moved (default: when Run starts). A message that fails again while
	// the redrive runs comes back to the dead-letter queue as a new message;
	// without the cut-off it would be moved again, and again.
	Before time.Time
	// Groups, when set, moves only the messages of these FIFO groups; the
	// others stay in the dead-letter queue, untouched but for a receive
	// (visible again when the redrive ends).
	Groups []string
	// DryRun moves nothing: Result.Listed says what would move, in the
	// order it would. Listing receives the messages: their receive counts
	// rise by one and they are hidden until the redrive ends.
	DryRun bool
}

// Result of a redrive.
type Result struct {
	Moved   int
	Left    int // messages that reached the dead-letter queue after Before
	Skipped int // messages of groups not in Config.Groups
	// Listed is what a dry run would move, in order.
	Listed []Listed
}

// Listed is a message a dry run would move.
type Listed struct {
	ID, Group string
	DedupID   string    // its MessageDeduplicationId (FIFO)
	Key       string    // the dedup key its copy would carry ("" when none)
	SentAt    time.Time // when it reached the dead-letter queue
	Failure   string    // why it failed, when its copy says (sqsmsg.FailureAttribute)
	FailedAt  string
	Body      string // its body, for a tool that shows it on request
}

// ErrCannotCarryKey: a message has SQS's ten message attributes already and
// none of them is idempotency-key, so its copy could not keep its dedup key;
// move it by hand with an idempotency-key attribute in place of one of them.
var ErrCannotCarryKey = sqsmsg.ErrNoRoomForKey

// Validate reports a pair of queues that cannot be a queue and its
// dead-letter queue.
func (cfg Config) Validate() error {
	if sqsmsg.IsFIFO(cfg.DLQ) != sqsmsg.IsFIFO(cfg.Queue) {
		return fmt.Errorf("%s and %s: a FIFO queue's dead-letter queue is FIFO, a standard queue's is standard", sqsmsg.QueueName(cfg.DLQ), sqsmsg.QueueName(cfg.Queue))
	}
	return nil
}

// Run moves messages until a receive brings no message it has not seen
// (the dead-letter queue is empty, or holds only what this redrive leaves
// there), Max is reached, or something fails. On a DLQ too large to read
// within Visibility, the messages it leaves come back before the last are
// read and may hide some it never reached: run it again for those. It stops at the first failure, after the batch at
// hand: a message that could not be sent stays in the dead-letter queue
// (visible again after Visibility) together with the later messages of its
// group, and the error names it. A message sent whose delete failed comes
// back too; moved again within five minutes, SQS drops the second copy, and
// after that the ledger does (same key).
func Run(ctx context.Context, c SQS, cfg Config) (Result, error) {
	var res Result
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	if cfg.Visibility <= 0 {
		cfg.Visibility = time.Minute
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Second
	}
	if cfg.Before.IsZero() {
		cfg.Before = time.Now()
	}
	fifo := sqsmsg.IsFIFO(cfg.Queue)
	// Messages left in the DLQ (too new, of other groups, listed) are held
	// until the end, so that the receives get past them, then made visible
	// again. They are hidden only for Visibility: on a DLQ too large to
	// read within it they come back before the last are read. Each is held
	// and counted once, by message id, with the receipt handle of its last
	// receive, and a receive that brings no message not seen before ends
	// the redrive: so it ends, and what it holds is bounded by the DLQ's
	// distinct messages.
	held := map[string]int{} // message id -> index in left
	var left []*string       // receipt handles
	defer func() {
		for len(left) > 0 {
			n := min(len(left), 10)
			entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, n)
			for i, h := range left[:n] {
				entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: h}
			}
			_, _ = c.ChangeMessageVisibilityBatch(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &cfg.DLQ, Entries: entries})
			left = left[n:]
		}
	}()
	for cfg.Max == 0 || res.Moved+len(res.Listed) < cfg.Max {
		n := 10
		if cfg.Max > 0 {
			n = min(n, cfg.Max-res.Moved-len(res.Listed))
		}
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &cfg.DLQ, MaxNumberOfMessages: int32(n),
			WaitTimeSeconds:             int32(cfg.Wait / time.Second),
			VisibilityTimeout:           int32(cfg.Visibility / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return res, fmt.Errorf("receive from %s: %w", sqsmsg.QueueName(cfg.DLQ), err)
		}
		var old []types.Message
		var oldMsgs []effect.Message
		hold := func(m types.Message) {
			held[aws.ToString(m.MessageId)] = len(left)
			left = append(left, m.ReceiptHandle)
		}
		fresh := 0
		for _, m := range out.Messages {
			if i, ok := held[aws.ToString(m.MessageId)]; ok {
				left[i] = m.ReceiptHandle // back: hidden again by this receive
				continue
			}
			fresh++
			msg := sqsmsg.ToMessage(cfg.DLQ, m)
			switch {
			case !msg.SentAt.Before(cfg.Before):
				res.Left++
				hold(m)
			case len(cfg.Groups) > 0 && !slices.Contains(cfg.Groups, msg.Group):
				res.Skipped++
				hold(m)
			case cfg.DryRun:
				res.Listed = append(res.Listed, listed(msg))
				hold(m)
			default:
				old, oldMsgs = append(old, m), append(oldMsgs, msg)
			}
		}
		if fresh == 0 {
			return res, nil
		}
		if len(old) == 0 {
			continue
		}
		moved, err := move(ctx, c, cfg, fifo, old, oldMsgs)
		res.Moved += moved
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// listed describes a message a dry run would move.
func listed(m effect.Message) Listed {
	l := Listed{ID: m.ID, Group: m.Group, DedupID: m.DedupID, SentAt: m.SentAt, Failure: m.Attributes[sqsmsg.FailureAttribute], FailedAt: m.Attributes[sqsmsg.FailedAtAttribute], Body: m.Body}
	if k, err := (dedup.KeySource{}).Extract(m); err == nil {
		l.Key = k
	}
	return l
}

// move copies one received batch (msgs, with their effect.Message views)
// to the queue and deletes from the DLQ what was copied. In a FIFO queue a
// SendMessageBatch carries at most one message per group (the batch is sent
// in rounds: each group's next message per round), so that a failed entry
// can never be followed by a later message of its group that succeeded; a
// group stops at its first message that cannot be copied, and it and the
// rest of its group stay in the DLQ, in order, while other groups go on. A
// SendMessageBatch that fails as a whole ends the move, deleting none of its
// messages: it may have taken effect; a copy that arrives twice (this
// move's and a later one's) is one logical message, with one dedup key.
func move(ctx context.Context, c SQS, cfg Config, fifo bool, msgs []types.Message, views []effect.Message) (int, error) {
	var stop error
	fail := func(err error) {
		if stop == nil {
			stop = err
		}
	}
	stopped := map[string]bool{} // FIFO groups that stop in this move
	entry := func(i int) (types.SendMessageBatchRequestEntry, bool) {
		m, msg := msgs[i], views[i]
		// Back in its queue, the message is what it was: the DLQ copy's
		// failure attributes stay behind.
		attrs, ok := sqsmsg.WithKey(msg, sqsmsg.WithoutFailure(m.MessageAttributes))
		if !ok {
			fail(fmt.Errorf("message %s not moved: %w", msg.ID, ErrCannotCarryKey))
			return types.SendMessageBatchRequestEntry{}, false
		}
		e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body, MessageAttributes: attrs}
		if fifo {
			if msg.Group == "" {
				fail(fmt.Errorf("message %s not moved: it has no MessageGroupId", msg.ID))
				return e, false
			}
			e.MessageGroupId = aws.String(msg.Group)
			e.MessageDeduplicationId = aws.String(CopyDeduplicationID(msg.ID, aws.ToString(m.ReceiptHandle)))
		}
		return e, true
	}
	sent := make([]bool, len(msgs))
	done := make([]bool, len(msgs)) // sent, or left for good in this move
	var sendErr error
	for sendErr == nil {
		// One round: the next message of every group that has not stopped
		// (in a standard queue, every message).
		var entries []types.SendMessageBatchRequestEntry
		inRound := map[string]bool{}
		size := 0
		for i := range msgs {
			if done[i] {
				continue
			}
			g := views[i].Group
			if fifo && (stopped[g] || inRound[g]) {
				if stopped[g] {
					done[i] = true
				}
				continue
			}
			inRound[g] = true
			e, ok := entry(i)
			if !ok {
				done[i] = true
				stopped[g] = true
				continue
			}
			// SQS refuses a whole SendMessageBatch past 1 MiB: what does
			// not fit waits for the next round, and its group with it.
			n := entrySize(e)
			if len(entries) > 0 && size+n > maxBatchBytes {
				continue
			}
			done[i] = true
			size += n
			entries = append(entries, e)
		}
		if len(entries) == 0 {
			break
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &cfg.Queue, Entries: entries})
		if err != nil {
			// Nothing of this batch is deleted: its copies may have arrived,
			// and a later move sends them again (same keys: the ledger
			// applies each once).
			sendErr = fmt.Errorf("send to %s: %w", sqsmsg.QueueName(cfg.Queue), err)
			break
		}
		answered := map[int]bool{}
		for _, s := range out.Successful {
			if i, ok := entryIndex(s.Id, len(msgs)); ok {
				sent[i], answered[i] = true, true
			}
		}
		for _, f := range out.Failed {
			if i, ok := entryIndex(f.Id, len(msgs)); ok && !sent[i] {
				answered[i] = true
				stopped[views[i].Group] = true
				fail(fmt.Errorf("message %s not moved: %s: %s", aws.ToString(msgs[i].MessageId), aws.ToString(f.Code), aws.ToString(f.Message)))
			}
		}
		// An entry the answer names neither as sent nor as failed has not
		// moved, as far as anyone can tell: it stops its group like a
		// failure, so that no later message of the group goes ahead of it.
		// Not deleted, it stays in the DLQ; if its copy did arrive, the
		// ledger drops a later move's copy (same key).
		for _, e := range entries {
			if i, _ := strconv.Atoi(aws.ToString(e.Id)); !answered[i] {
				stopped[views[i].Group] = true
				fail(fmt.Errorf("message %s not moved: %w", aws.ToString(msgs[i].MessageId), errNoResult))
			}
		}
	}
	stop = errors.Join(sendErr, stop)
	var dels []types.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if sent[i] {
			dels = append(dels, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(dels) > 0 {
		d, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &cfg.DLQ, Entries: dels})
		if err != nil {
			return len(dels), errors.Join(stop, fmt.Errorf("%d messages were copied to %s but not deleted from %s (they come back; their copies are dropped as duplicates): %w",
				len(dels), sqsmsg.QueueName(cfg.Queue), sqsmsg.QueueName(cfg.DLQ), err))
		}
		if len(d.Failed) > 0 {
			stop = errors.Join(stop, fmt.Errorf("%d messages were copied to %s but not deleted from %s (they come back; their copies are dropped as duplicates): %s",
				len(d.Failed), sqsmsg.QueueName(cfg.Queue), sqsmsg.QueueName(cfg.DLQ), aws.ToString(d.Failed[0].Message)))
		}
	}
	return len(dels), stop
}

// errNoResult: SQS's answer names an entry neither as sent nor as failed.
var errNoResult = errors.New("no result for the entry in SQS's answer to SendMessageBatch")

// entryIndex is the index an answer's entry id names, if it names one of n.
func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

// maxBatchBytes is SQS's limit on the total size of one SendMessageBatch.
const maxBatchBytes = 1 << 20

// entrySize is what an entry counts towards maxBatchBytes: its body and its
// attributes' names, types and values.
func entrySize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for k, v := range e.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// copyPrefix starts the MessageDeduplicationId of every redrive copy.
const copyPrefix = "redrive-"

// CopyDeduplicationID is the MessageDeduplicationId of the copy a redrive
// sends back for the DLQ message messageID, received under receiptHandle:
// "redrive-<messageID>-<16 hex digits of the receipt handle's SHA-256>", or
// "redrive-sha256-<hex SHA-256 of both>" should that not be a valid dedup id.
//
// It is fresh per receive of the DLQ message. The original's dedup id may be
// inside SQS's five-minute window, which would silently drop the copy; and a
// DLQ message an earlier move did copy without learning so (its answer
// lost) may since have been consumed, failed again and come back to the DLQ
// behind later messages of its group: a second move must put it back ahead
// of them, which a dedup id fixed per DLQ message would have SQS drop. Two
// copies that both arrive carry one dedup key (idempotency-key), so the
// ledger applies the message once.
func CopyDeduplicationID(messageID, receiptHandle string) string {
	r := sha256.Sum256([]byte(receiptHandle))
	id := copyPrefix + messageID + "-" + hex.EncodeToString(r[:8])
	if outbox.ValidID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(messageID + "\x00" + receiptHandle))
	return copyPrefix + "sha256-" + hex.EncodeToString(sum[:])
}

// CopiedFrom is the DLQ message id a redrive copy's MessageDeduplicationId
// names (false for an id CopyDeduplicationID did not make, or made hashed).
func CopiedFrom(dedupID string) (string, bool) {
	rest, ok := strings.CutPrefix(dedupID, copyPrefix)
	if !ok || strings.HasPrefix(rest, "sha256-") {
		return "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 || len(rest)-i-1 != 16 {
		return "", false
	}
	return rest[:i], true
}
