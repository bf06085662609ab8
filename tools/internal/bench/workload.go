package bench

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Work is the benchmark's workload: N ledger deposits spread round-robin
// over Groups FIFO message groups (one account per group), each group's seq
// counting 1, 2, ... in send order. Every message has its own deduplication
// id, so none is a duplicate.
type Work struct {
	N, Groups int
	// Size pads each body to this many bytes (a "pad" field the ledger
	// ignores); 0 or less than the deposit itself: no padding.
	Size int
	// Prefix makes the deduplication ids unique to one run.
	Prefix string
	// Standard is the workload of a standard queue: no group id, no
	// deduplication id, and no seq in the body (a standard queue keeps no
	// order, and the ledger refuses a seq that goes back).
	Standard bool
}

// maxBatchBytes is SQS's cap on a SendMessageBatch's total payload.
const maxBatchBytes = 1 << 20

// Workload returns n messages over groups groups (at least 1).
func Workload(n, groups int) Work {
	return Work{N: n, Groups: max(groups, 1), Prefix: "m"}
}

// Entry returns message i's send entry (Id is its index in a batch, set by
// the caller).
func (w Work) Entry(i int) sqstypes.SendMessageBatchRequestEntry {
	g := i % w.Groups
	seq := i/w.Groups + 1
	acct := "g" + strconv.Itoa(g)
	body := fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, 1+i%97, seq)
	if w.Standard {
		body = fmt.Sprintf(`{"account":%q,"amount_cents":%d}`, acct, 1+i%97)
	}
	if pad := w.Size - len(body) - len(`,"pad":""`); pad > 0 {
		body = body[:len(body)-1] + `,"pad":"` + strings.Repeat("x", pad) + `"}`
	}
	if w.Standard {
		return sqstypes.SendMessageBatchRequestEntry{MessageBody: aws.String(body)}
	}
	return sqstypes.SendMessageBatchRequestEntry{
		MessageBody:            aws.String(body),
		MessageGroupId:         aws.String(acct),
		MessageDeduplicationId: aws.String(w.Prefix + "-" + strconv.Itoa(i)),
	}
}

// Batches returns all messages in send order, in batches of up to ten
// whose bodies together stay within SQS's 1 MiB a batch.
func (w Work) Batches() [][]sqstypes.SendMessageBatchRequestEntry {
	return w.Shard(0, 1)
}

// Shard returns the batches of sender k of senders: the messages of the
// groups g with g % senders == k, in send order. Sending each shard from its
// own goroutine keeps every group's order.
func (w Work) Shard(k, senders int) [][]sqstypes.SendMessageBatchRequestEntry {
	var out [][]sqstypes.SendMessageBatchRequestEntry
	var cur []sqstypes.SendMessageBatchRequestEntry
	bytes := 0
	for i := range w.N {
		if (i%w.Groups)%senders != k {
			continue
		}
		e := w.Entry(i)
		n := len(aws.ToString(e.MessageBody))
		if len(cur) > 0 && bytes+n > maxBatchBytes {
			out = append(out, cur)
			cur, bytes = nil, 0
		}
		e.Id = aws.String(strconv.Itoa(len(cur)))
		cur = append(cur, e)
		bytes += n
		if len(cur) == 10 {
			out = append(out, cur)
			cur, bytes = nil, 0
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// runtimeMem is a reading of the allocation counter.
type runtimeMem struct{ mallocs uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.mallocs = s.Mallocs
}
