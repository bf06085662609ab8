package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// LocateSQS is what Locate calls on SQS: the queue's attributes and its
// DLQ's URL (DescribeQueue), and the DLQ's listing (a redrive's dry run).
type LocateSQS interface {
	QueueReader
	redrive.SQS
}

// KeyQueueName is the queue name a scoped key
// (<namespace>#<queue>[#<group>]#<key>) names; "" when it names none.
func KeyQueueName(key string) string {
	parts := strings.Split(key, "#")
	if len(parts) < 3 {
		return ""
	}
	return strings.NewReplacer("%23", "#", "%25", "%").Replace(parts[1])
}

// Where says where a message is now, as far as can be known without
// taking it from anyone: its record, and a bounded listing of its queue's
// dead-letter queue.
type Where struct {
	Key    string
	Record *dedup.Record // nil: none (never claimed, or expired)
	Queue  QueueInfo     // its queue, with its depth and its DLQ
	// Dead is its copy in the DLQ, with the failure reason and time it
	// carries; nil when the search did not meet it. DeadKey is the key
	// that copy carries, scoped as the worker scopes it ("" when none).
	Dead    *redrive.Listed
	DeadKey string
	// Searched is how many of the DLQ's messages the search read; Bounded
	// that it stopped at its bound (the DLQ may hold more).
	Searched int
	Bounded  bool
	// SearchErr is why the DLQ could not be searched ("" when it was, or
	// the queue has no DLQ).
	SearchErr string
	// DLQSearched: the DLQ was listed (Searched, Bounded say how far).
	DLQSearched bool
	// Verdict says in one sentence where the message is.
	Verdict string
}

// LocateRequest names what Locate looks for.
type LocateRequest struct {
	QueueURL  string        // the message's queue ("" : the record alone tells)
	Key       string        // its scoped key
	Namespace string        // the workers' namespace, to scope the DLQ's keys
	MessageID string        // its MessageId, when known: matches a message the redrive policy moved
	Record    *dedup.Record // its record (ReadRecord), nil when none
	Now       time.Time
	// Max bounds the DLQ messages read (0: no DLQ search); Wait is the
	// receives' long-poll wait (0: a short poll).
	Max  int
	Wait time.Duration
}

// Locate says where the message of req is now; a queue or DLQ it cannot
// read is told in Where.SearchErr, the record telling the rest. SQS has no peek: a message
// still in its queue cannot be seen without receiving it, which would hide
// it from the workers for the visibility timeout (and hold its FIFO group),
// so the queue is described by its counts only, and the record tells the
// rest. The DLQ is searched as `worker redrive --dry-run` lists it
// (redrive.Run, DryRun): up to req.Max messages received and made visible
// again at once, nothing deleted; each one's receive count rises by one,
// and in a FIFO DLQ a group is seen only as far as one receive reaches. A
// DLQ message is the one looked for when its key, scoped as the worker
// scopes it (its idempotency-key, which a dead-letter copy carries, else
// its dedup id, else its MessageId), is req.Key, or its MessageId is
// req.MessageID.
func Locate(ctx context.Context, c LocateSQS, req LocateRequest) Where {
	w := Where{Key: req.Key, Record: req.Record}
	if req.QueueURL != "" {
		qi, err := DescribeQueue(ctx, c, req.QueueURL)
		w.Queue = qi
		if err != nil {
			// The record still tells; the DLQ stays a possibility.
			w.SearchErr = err.Error()
			w.Verdict = w.verdict(req.Now)
			return w
		}
		if qi.DLQURL != "" && req.Max > 0 {
			if err := w.searchDLQ(ctx, c, req); err != nil {
				w.SearchErr = err.Error()
			}
		}
	}
	w.Verdict = w.verdict(req.Now)
	return w
}

func (w *Where) searchDLQ(ctx context.Context, c redrive.SQS, req LocateRequest) error {
	res, err := redrive.Run(ctx, c, redrive.Config{DLQ: w.Queue.DLQURL, Queue: w.Queue.URL, DryRun: true, Max: req.Max,
		Wait: max(req.Wait, time.Millisecond)})
	if err != nil {
		return err
	}
	w.DLQSearched = true
	w.Searched, w.Bounded = len(res.Listed), len(res.Listed) >= req.Max
	scope := dedup.Scope{Namespace: req.Namespace, Queue: w.Queue.Name, PerGroup: w.Queue.DedupScope == "messageGroup"}
	for i, l := range res.Listed {
		key := ""
		if l.Key != "" {
			key = scope.Key(l.Group, l.Key)
		}
		if (key != "" && key == req.Key) || copyOf(l, req.MessageID) {
			w.Dead, w.DeadKey = &res.Listed[i], key
			break
		}
	}
	return nil
}

// copyOf says whether l is the message whose MessageId is id, or the
// worker's dead-letter copy of it: a copy has a MessageId of its own, and
// in a FIFO queue a MessageDeduplicationId made from the original's
// (sqsmsg.CopyDeduplicationID).
func copyOf(l redrive.Listed, id string) bool {
	return id != "" && (l.ID == id || (l.DedupID != "" && l.DedupID == sqsmsg.CopyDeduplicationID(id)))
}

// Find reads the record of the message req names (read: its record under
// a key, nil when none) and Locates it. A search by message id scopes the
// id as the key, which is the message's key only when it had neither an
// idempotency-key nor a dedup id; when the DLQ search meets the message
// by its id and its copy carries another key, that key and its record are
// the message's.
func Find(ctx context.Context, c LocateSQS, read func(key string) (*dedup.Record, error), req LocateRequest) (Where, error) {
	rec, err := read(req.Key)
	if err != nil {
		return Where{}, err
	}
	req.Record = rec
	w := Locate(ctx, c, req)
	if w.Dead == nil || w.DeadKey == "" || w.DeadKey == req.Key {
		return w, nil
	}
	if rec, err = read(w.DeadKey); err != nil {
		return Where{}, err
	}
	w.Key, w.Record = w.DeadKey, rec
	w.Verdict = w.verdict(req.Now)
	return w, nil
}

// verdict says where the message is, from its DLQ copy and its record.
func (w *Where) verdict(now time.Time) string {
	// Without a search of its DLQ, the DLQ stays a possibility.
	unsearched := !w.DLQSearched && (w.Queue.DLQURL != "" || w.Queue.URL == "" || w.SearchErr != "")
	switch {
	case w.Dead != nil:
		s := fmt.Sprintf("in the dead-letter queue %s since %s", sqsmsg.QueueName(w.Queue.DLQURL), w.Dead.SentAt.UTC().Format(time.RFC3339))
		if w.Dead.Failure != "" {
			s += ": " + w.Dead.Failure
		}
		return s + "; worker redrive moves it back"
	case w.Record == nil && unsearched:
		return "never claimed: it waits in its queue (not yet received, or failing before its claim), went to its DLQ before a claim, or was processed and its record expired"
	case w.Record == nil:
		return "never claimed: " + w.notDead() + "it waits in its queue (not yet received, or failing before its claim), or it was processed and its record expired"
	case w.Record.Status == dedup.StatusCompleted:
		return "done: its effect was applied at " + w.Record.CompletedAt.UTC().Format(time.RFC3339) + "; a redelivery is deleted as a duplicate"
	case w.Record.LeaseUntil.After(now):
		return "being processed: a worker holds its claim (the message is in flight)"
	case unsearched:
		return "its worker stopped: the message is in its queue, taken over at its next delivery, or in its DLQ if it ran out of receives"
	default:
		return "its worker stopped: " + w.notDead() + "it is in its queue, taken over at its next delivery"
	}
}

// notDead says what the DLQ search showed, when it showed the message is
// not there.
func (w *Where) notDead() string {
	dlq := sqsmsg.QueueName(w.Queue.DLQURL)
	switch {
	case w.Queue.DLQURL == "":
		return "its queue has no DLQ; "
	case w.Bounded:
		// SQS hands messages out in no order across groups (a FIFO
		// queue) or at all (a standard one): the bound reads a sample.
		return fmt.Sprintf("not among the %d messages of %s read (it holds about %d: the search stops at its bound, and SQS hands messages out in no set order); ", w.Searched, dlq, max(w.Queue.DLQDepth.Visible+w.Queue.DLQDepth.InFlight, w.Searched))
	case w.Searched < w.Queue.DLQDepth.Visible:
		return fmt.Sprintf("not among the %d messages of %s read (it counts about %d: a FIFO DLQ shows a group only as far as one receive reaches, and another reader may hold some); ", w.Searched, dlq, w.Queue.DLQDepth.Visible)
	}
	return fmt.Sprintf("not in %s (%d messages read); ", dlq, w.Searched)
}

var _ LocateSQS = (*sqs.Client)(nil)
