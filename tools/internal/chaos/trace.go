package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tracer writes one line per message-level event that crosses a proxy: what
// each ReceiveMessage handed out (with receive counts), deletes and
// visibility changes by receipt handle, and the dedup and ledger writes by
// key, each with the fault the proxy applied. It is how a violation is
// traced back to the requests that caused it (trace.log in the run's
// directory).
type Tracer struct {
	mu       sync.Mutex
	w        *bufio.Writer
	receipts map[string]string // receipt handle -> dedup key and message id
	marks    map[string][]Mark // raw dedup key -> its claims, extends, completes and releases
}

// Mark is one dedup write of a key as the trace saw it, kept in memory for
// the claim-mode verdict (see Excuses).
type Mark struct {
	At     time.Time
	Worker string // slot: "w1"
	Event  string // claim, extend, complete, release
	Fault  string // as in the trace: pass, reset, lost-ack, 500, ..., with +held
	OK     bool   // the write took effect (its response may be lost)
	// Late: a claim that won with its lease already over when it was
	// applied or when its answer was delivered.
	Late bool
}

// Marks returns the dedup writes of key, in the order the proxies saw them.
func (t *Tracer) Marks(key string) []Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Mark(nil), t.marks[key]...)
}

// NewTracer writes to w; Flush before reading it.
func NewTracer(w io.Writer) *Tracer {
	return &Tracer{w: bufio.NewWriterSize(w, 64<<10), receipts: map[string]string{}, marks: map[string][]Mark{}}
}

// Flush writes what is buffered.
func (t *Tracer) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w.Flush()
}

// Observer returns the proxy observer of one worker slot and service.
func (t *Tracer) Observer(worker, service string) func(Exchange) {
	return func(e Exchange) {
		lines := t.decode(service, e)
		if len(lines) == 0 {
			return
		}
		now := time.Now().Format("15:04:05.000") // the trace's clock; marks take their own
		fault := e.Fault.String()
		if e.Held {
			fault += "+held"
		}
		at := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, l := range lines {
			fmt.Fprintf(t.w, "%s %s %s %s\n", now, worker, fault, l)
			if service != "dynamodb" {
				continue
			}
			if f := strings.Fields(l); len(f) >= 2 {
				switch f[0] {
				case "claim", "extend", "complete", "release", "commit":
					t.marks[f[1]] = append(t.marks[f[1]], Mark{At: at, Worker: worker, Event: f[0], Fault: fault,
						OK: strings.Contains(l, "-> ok"), Late: lateClaim(l)})
				}
			}
		}
	}
}

// Wire shapes of the requests and responses the tracer reads (AWS JSON 1.0).
type (
	avS struct {
		S string `json:"S"`
		N string `json:"N"`
	}
	sqsMessage struct {
		MessageID     string            `json:"MessageId"`
		ReceiptHandle string            `json:"ReceiptHandle"`
		Attributes    map[string]string `json:"Attributes"`
		MessageAttrs  map[string]struct {
			StringValue string `json:"StringValue"`
		} `json:"MessageAttributes"`
	}
	sqsEntry struct {
		ID                string `json:"Id"`
		ReceiptHandle     string `json:"ReceiptHandle"`
		VisibilityTimeout *int   `json:"VisibilityTimeout"`
	}
	sqsBody struct {
		sqsEntry // DeleteMessage, ChangeMessageVisibility
		// SendMessage (the worker's move to the DLQ)
		QueueURL  string `json:"QueueUrl"`
		GroupID   string `json:"MessageGroupId"`
		DedupID   string `json:"MessageDeduplicationId"`
		SendAttrs map[string]struct {
			StringValue string `json:"StringValue"`
		} `json:"MessageAttributes"`
		Messages   []sqsMessage `json:"Messages"`
		Entries    []sqsEntry   `json:"Entries"`
		Successful []sqsEntry   `json:"Successful"`
		Failed     []struct {
			ID   string `json:"Id"`
			Code string `json:"Code"`
		} `json:"Failed"`
		Type string `json:"__type"`
	}
	ddbUpdate struct {
		Key                       map[string]avS `json:"Key"`
		Item                      map[string]avS `json:"Item"`
		UpdateExpression          string         `json:"UpdateExpression"`
		ExpressionAttributeValues map[string]avS `json:"ExpressionAttributeValues"`
	}
	ddbBody struct {
		ddbUpdate
		TransactItems []struct {
			Update *ddbUpdate `json:"Update"`
			Put    *ddbUpdate `json:"Put"`
		} `json:"TransactItems"`
		Type                string `json:"__type"`
		CancellationReasons []struct {
			Code string `json:"Code"`
		} `json:"CancellationReasons"`
		Item map[string]avS `json:"Item"` // ALL_OLD of a failed condition
	}
)

func (t *Tracer) decode(service string, e Exchange) []string {
	if service == "sqs" {
		return t.decodeSQS(e)
	}
	return decodeDynamo(e)
}

func (t *Tracer) decodeSQS(e Exchange) []string {
	var req, resp sqsBody
	_ = json.Unmarshal(e.Request, &req)
	if e.Response != nil {
		_ = json.Unmarshal(e.Response, &resp)
	}
	var out []string
	switch e.Op {
	case "ReceiveMessage":
		if e.Status != 200 {
			return []string{"ReceiveMessage " + errType(e.Status, resp.Type)}
		}
		t.mu.Lock()
		for _, m := range resp.Messages {
			key := m.MessageAttrs["idempotency-key"].StringValue
			t.receipts[m.ReceiptHandle] = key + " " + m.MessageID
			out = append(out, fmt.Sprintf("receive %s %s group=%s rc=%s seq=%s", key, m.MessageID,
				m.Attributes["MessageGroupId"], m.Attributes["ApproximateReceiveCount"], m.Attributes["SequenceNumber"]))
		}
		t.mu.Unlock()
	case "SendMessage":
		result := "ok"
		switch {
		case e.Response == nil:
			result = "(not sent)"
		case e.Status != 200:
			result = errType(e.Status, resp.Type)
		}
		out = append(out, fmt.Sprintf("send %s to=%s group=%s dedup=%s -> %s", req.SendAttrs["idempotency-key"].StringValue,
			queueNameOf(req.QueueURL), req.GroupID, req.DedupID, result))
	case "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "DeleteMessage", "ChangeMessageVisibility":
		failed := map[string]string{}
		for _, f := range resp.Failed {
			failed[f.ID] = f.Code
		}
		verb := "delete"
		if strings.HasPrefix(e.Op, "ChangeMessageVisibility") {
			verb = "visibility"
		}
		if !strings.HasSuffix(e.Op, "Batch") {
			req.Entries = []sqsEntry{req.sqsEntry}
		}
		t.mu.Lock()
		for _, en := range req.Entries {
			who := t.receipts[en.ReceiptHandle]
			if who == "" {
				who = "? ?"
			}
			l := verb + " " + who
			if en.VisibilityTimeout != nil {
				l += fmt.Sprintf(" to=%ds", *en.VisibilityTimeout)
			}
			switch {
			case e.Response == nil:
			case e.Status != 200:
				l += " " + errType(e.Status, resp.Type)
			case failed[en.ID] != "":
				l += " failed=" + failed[en.ID]
			}
			out = append(out, l)
		}
		t.mu.Unlock()
	}
	return out
}

func decodeDynamo(e Exchange) []string {
	var req, resp ddbBody
	_ = json.Unmarshal(e.Request, &req)
	if e.Response != nil {
		_ = json.Unmarshal(e.Response, &resp)
	}
	result := ""
	switch {
	case e.Response == nil:
		result = "(not sent)"
	case e.Status == 200:
		result = "ok"
	default:
		result = errType(e.Status, resp.Type)
		if len(resp.CancellationReasons) > 0 {
			var codes []string
			for _, r := range resp.CancellationReasons {
				codes = append(codes, r.Code)
			}
			result += "[" + strings.Join(codes, ",") + "]"
		}
		if st := resp.Item["status"].S; st != "" {
			result += fmt.Sprintf(" (held: %s token=%s lease_until=%s)", st, short(resp.Item["token"].S), resp.Item["lease_until"].N)
		}
	}
	switch e.Op {
	case "PutItem":
		it := req.Item
		if result == "ok" && !e.Sent.IsZero() {
			// How much of its lease the claim had left when DynamoDB
			// applied it: a request delayed past its lease (SDK retries,
			// a partition) wins with a lease already over.
			// And how much it had left when its answer reached the worker:
			// an answer held past the lease (a partition) hands the worker
			// a claim that is already over.
			if lu, err := strconv.ParseInt(it["lease_until"].N, 10, 64); err == nil {
				result += fmt.Sprintf(" lease_left=%dms answer_left=%dms", lu-e.Sent.UnixMilli(), lu-time.Now().UnixMilli())
			}
		}
		return []string{fmt.Sprintf("claim %s token=%s attempts=%s -> %s", rawKey(it["pk"].S), short(it["token"].S), it["attempts"].N, result)}
	case "UpdateItem":
		what := "extend"
		switch {
		case strings.Contains(req.UpdateExpression, ":done"):
			what = "complete"
		case req.ExpressionAttributeValues[":lu"].N == "0":
			what = "release"
		}
		return []string{fmt.Sprintf("%s %s token=%s -> %s", what, rawKey(req.Key["pk"].S), short(req.ExpressionAttributeValues[":tok"].S), result)}
	case "TransactWriteItems":
		if len(req.TransactItems) == 0 || req.TransactItems[0].Update == nil {
			return nil
		}
		u := req.TransactItems[0].Update
		return []string{fmt.Sprintf("commit %s token=%s -> %s", rawKey(u.Key["pk"].S), short(u.ExpressionAttributeValues[":tok"].S), result)}
	}
	return nil
}

// queueNameOf is the last path element of a queue URL.
func queueNameOf(url string) string { return url[strings.LastIndexByte(url, '/')+1:] }

func errType(status int, typ string) string {
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	if typ == "" {
		typ = "error"
	}
	return fmt.Sprintf("%s(%d)", typ, status)
}

func short(token string) string {
	if len(token) > 6 {
		return token[:6]
	}
	return token
}

// History returns the trace lines that mention key, for a violation's
// write-up, in time order (lines begin with the time of day).
func History(trace string, key string, limit int) []string {
	var out []string
	for _, l := range strings.Split(trace, "\n") {
		if strings.Contains(l, " "+key+" ") {
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i][:min(12, len(out[i]))] < out[j][:min(12, len(out[j]))] })
	return out[:min(len(out), limit)]
}

// Paths the trace shows were taken, by name. They are the ways a worker can
// go wrong; a run that exercised none of them proves little.
const (
	PathFencedCommit   = "stale commits refused by the fencing token"
	PathLostAckCommit  = "commits whose response was lost (then recognised)"
	PathLostAckClaim   = "claims whose response was lost (then recognised)"
	PathBusy           = "claims finding another worker's live lease"
	PathDuplicate      = "claims finding the key COMPLETED (duplicates)"
	PathTakeover       = "claims after an earlier claim of the key (lease expired or released)"
	PathOrderRefused   = "ledger writes refused by last_seq < seq (order)"
	PathLostAckDelete  = "deletes whose response was lost"
	PathLostReceive    = "ReceiveMessage responses lost (messages hidden until the visibility timeout)"
	PathHeldCommit     = "commits held by a partition"
	PathEntryExists    = "ledger writes refused: entry already there (a double)"
	PathDLQSendLost    = "moves to the DLQ whose response was lost"
	PathConflictCommit = "commits cancelled with TransactionConflict (retried by the worker)"
	PathErrorCommit    = "commit attempts answered with 5xx or throttling"
	PathErrorClaim     = "claim attempts answered with 5xx or throttling"
	PathErrorExtend    = "heartbeat (extend) attempts failed (reset, 5xx, throttling)"
	PathExpiredClaim   = "claims that won with their lease already over when applied"
	PathExpiredAnswer  = "claims that won, answered after their lease was over"
)

// cancellationReasons returns the codes of "TransactionCanceledException(400)[A,B,C]" in l.
func cancellationReasons(l string) []string {
	i := strings.Index(l, "TransactionCanceledException(")
	if i < 0 {
		return nil
	}
	rest := l[i:]
	a, b := strings.IndexByte(rest, '['), strings.IndexByte(rest, ']')
	if a < 0 || b < a {
		return nil
	}
	return strings.Split(rest[a+1:b], ",")
}

// lateClaim reports whether a trace line is a claim that won with its lease
// over when applied or when answered.
func lateClaim(l string) bool {
	return strings.Contains(l, "-> ok") && (strings.Contains(l, " lease_left=-") || strings.Contains(l, " answer_left=-"))
}

// isErrorFault reports whether a trace line's fault is an error response.
func isErrorFault(fault string) bool {
	switch fault {
	case Err500.String(), Err503.String(), Throttle.String(), TxConflict.String():
		return true
	}
	return false
}

// Exercised counts the paths of PathFencedCommit and its kin in a trace.
func Exercised(trace string) map[string]int {
	out := map[string]int{}
	claimed := map[string]bool{} // keys claimed before
	for _, l := range strings.Split(trace, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		fault, event, key := f[2], f[3], f[4]
		held := strings.HasSuffix(fault, "+held")
		fault = strings.TrimSuffix(fault, "+held")
		switch event {
		case "commit", "complete":
			if held {
				out[PathHeldCommit]++
			}
			if isErrorFault(fault) && fault != "tx-conflict" {
				out[PathErrorCommit]++
			}
			reasons := cancellationReasons(l)
			switch {
			case len(reasons) > 0 && reasons[0] == "TransactionConflict":
				out[PathConflictCommit]++
			case len(reasons) > 0 && reasons[0] == "ConditionalCheckFailed":
				out[PathFencedCommit]++ // the dedup record's token or status
			case len(reasons) > 1 && reasons[1] == "ConditionalCheckFailed":
				out[PathOrderRefused]++ // the account's last_seq < seq
			case len(reasons) > 2 && reasons[2] == "ConditionalCheckFailed":
				out[PathEntryExists]++ // the entry's attribute_not_exists(pk)
			case fault == "lost-ack" && strings.Contains(l, "-> ok"):
				out[PathLostAckCommit]++
			}
		case "extend":
			if fault != "pass" && fault != "lost-ack" {
				out[PathErrorExtend]++
			}
		case "claim":
			if isErrorFault(fault) {
				out[PathErrorClaim]++
			}
			if strings.Contains(l, " lease_left=-") {
				out[PathExpiredClaim]++
			} else if strings.Contains(l, " answer_left=-") {
				out[PathExpiredAnswer]++
			}
			switch {
			case fault == "lost-ack" && strings.Contains(l, "-> ok"):
				out[PathLostAckClaim]++
			case strings.Contains(l, "(held: IN_PROGRESS"):
				out[PathBusy]++
			case strings.Contains(l, "(held: COMPLETED"):
				out[PathDuplicate]++
			case strings.Contains(l, "-> ok") && claimed[key]:
				out[PathTakeover]++ // a claim after an earlier one of this key: released or expired
			}
			claimed[key] = true
		case "delete":
			if fault == "lost-ack" {
				out[PathLostAckDelete]++
			}
		case "send":
			if fault == "lost-ack" {
				out[PathDLQSendLost]++
			}
		case "receive":
			if fault == "lost-ack" {
				out[PathLostReceive]++
			}
		}
	}
	return out
}
