package sqsevent

import (
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// Every receive of a message counts toward its queue's maxReceiveCount,
// those of a message the handler hands back without starting it included:
// one behind a failed message of its FIFO group, or with too little time
// left in the invocation. A FIFO batch of n messages of one group, of which
// each invocation gets through only the first, spends n-1 receives of its
// last message before it starts; with maxReceiveCount <= n the redrive
// policy moves it to the dead-letter queue without it ever running. The
// handler cannot change the batch (the event source mapping's batch size)
// but can say so: the rule is maxReceiveCount > batch size, plus the
// attempts wanted of each message (docs/DEPLOY.md), and the worker-lambda
// Terraform module refuses a FIFO queue that breaks it.

// Log messages of this file (tests match them).
const (
	nearRedriveMsg    = "handed back unstarted with at most one receive left: the redrive policy may move it to the dead-letter queue without it ever running"
	batchAtRedriveMsg = "a FIFO batch holds as many messages that run in order as the queue's maxReceiveCount: the last can be dead-lettered without ever running; set maxReceiveCount above the event source mapping's batch size"
)

// warnLongLanes warns, once per queue, of a FIFO lane (the messages of a
// batch that run in order) at least as long as its queue's maxReceiveCount.
func (h *Handler) warnLongLanes(recs []events.SQSMessage, lanes [][]int, queues map[string]resolved) {
	for _, lane := range lanes {
		arn := recs[lane[0]].EventSourceARN
		limit := queues[arn].q.MaxReceiveCount
		if !isFIFO(arn) || limit == 0 || len(lane) < limit {
			continue
		}
		if _, was := h.warned.LoadOrStore(arn, true); was {
			continue
		}
		h.cfg.Log.Warn(batchAtRedriveMsg, "queue", queueName(arn), "messages_in_order", len(lane),
			"batch", len(recs), "max_receive_count", limit, "fail_rest", h.cfg.FailRest.String())
	}
}

// nearRedrive logs and counts the messages reported without being started
// (not done, not ran) that have at most one receive left before their
// queue's redrive policy moves them.
func (h *Handler) nearRedrive(recs []events.SQSMessage, done, ran []bool, queues map[string]resolved) {
	var counts map[string]int
	for i, r := range recs {
		limit := queues[r.EventSourceARN].q.MaxReceiveCount
		if done[i] || ran[i] || limit == 0 {
			continue
		}
		count, err := strconv.Atoi(r.Attributes[attrReceiveCount])
		if err != nil || limit-count > 1 {
			continue
		}
		name := queueName(r.EventSourceARN)
		h.cfg.Log.Warn(nearRedriveMsg, "queue", name, "message_id", r.MessageId, "group", r.Attributes[attrGroup],
			"receive_count", count, "max_receive_count", limit, "receives_left", max(limit-count, 0))
		if counts == nil {
			counts = map[string]int{}
		}
		counts[name]++
	}
	if o := h.cfg.Observer; o != nil {
		for name, n := range counts {
			o.ReturnedNearRedrive(name, n)
		}
	}
}
