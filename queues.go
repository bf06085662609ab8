package exactly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// queueInfo is what start-up reads of a queue.
type queueInfo struct {
	url, name  string
	fifo       bool // FifoQueue
	perGroup   bool // DeduplicationScope=messageGroup
	visibility time.Duration
	redrive    string // RedrivePolicy
	dlq        string // dead-letter queue URL, when permanent failures move there
}

// readQueue reads a queue's attributes. A queue that does not exist, or a
// permission the role lacks, is a ConfigError.
func readQueue(ctx context.Context, client SQS, url string) (queueInfo, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameFifoQueue, sqstypes.QueueAttributeNameDeduplicationScope,
			sqstypes.QueueAttributeNameRedrivePolicy, sqstypes.QueueAttributeNameVisibilityTimeout,
		},
	})
	if err != nil {
		var nf *sqstypes.QueueDoesNotExist
		if errors.As(err, &nf) {
			return queueInfo{}, configErr("Queues", ": queue %s does not exist: create it with `worker setup --queue %s` or the infra/terraform/modules/queue module", url, sqsmsg.QueueName(url))
		}
		return queueInfo{}, denied(fmt.Errorf("cannot read attributes of queue %s: %w", url, err), "sqs:GetQueueAttributes", url)
	}
	a := out.Attributes
	vis, _ := strconv.Atoi(a[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	return queueInfo{
		url: url, name: sqsmsg.QueueName(url),
		fifo:       a[string(sqstypes.QueueAttributeNameFifoQueue)] == "true",
		perGroup:   a[string(sqstypes.QueueAttributeNameDeduplicationScope)] == "messageGroup",
		visibility: time.Duration(vis) * time.Second,
		redrive:    a[string(sqstypes.QueueAttributeNameRedrivePolicy)],
	}, nil
}

// describeQueues reads each queue's attributes once at start-up: FIFO, the
// deduplication scope (dedup keys are scoped the same way), the visibility
// timeout (heartbeats) and the dead-letter queue.
func (s *settings) describeQueues(ctx context.Context) ([]pool.Queue, map[string]dedup.Scope, error) {
	var queues []pool.Queue
	var infos []queueInfo
	scopes := map[string]dedup.Scope{}
	for _, url := range s.Queues {
		qi, err := readQueue(ctx, s.SQS, url)
		if err != nil {
			return nil, nil, err
		}
		q := pool.Queue{URL: url, FIFO: qi.fifo, Receivers: s.Receivers, Lease: s.Lease, Visibility: qi.visibility}
		if s.Visibility > 0 {
			q.Visibility = s.Visibility
		}
		if q.Visibility < 2*time.Second {
			return nil, nil, configErr("Queues", ": queue %s has a visibility timeout of %s: want at least 2s (set it on the queue, or override it with Config.Visibility)", qi.name, q.Visibility)
		}
		switch {
		case qi.redrive == "":
			s.log.Warn("queue has no dead-letter queue: a permanent failure is retried until the message's retention period ends; give it a redrive policy",
				"queue", qi.name)
		case !s.LeaveToRedrivePolicy:
			dlq, err := deadLetterURL(ctx, s.SQS, qi.redrive)
			if transient(err) {
				return nil, nil, err // SQS having a bad minute: start-up tries again
			}
			if err != nil {
				return nil, nil, configErr("LeaveToRedrivePolicy", ": queue %s: %w", qi.name, err)
			}
			q.DLQURL = dlq
		}
		queues = append(queues, q)
		scopes[url] = dedup.Scope{Namespace: s.Namespace, Queue: qi.name, PerGroup: qi.perGroup}
		infos = append(infos, qi)
	}
	warnWiderDLQScope(ctx, s.log, s.SQS, infos)
	return queues, scopes, nil
}

// queueURLGetter resolves queue names to URLs.
type queueURLGetter interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// deadLetterARN returns the dead-letter queue ARN of a RedrivePolicy.
func deadLetterARN(redrive string) (string, bool) {
	const key = `"deadLetterTargetArn":"`
	i := strings.Index(redrive, key)
	if i < 0 {
		return "", false
	}
	arn := redrive[i+len(key):]
	j := strings.IndexByte(arn, '"')
	if j < 0 {
		return "", false
	}
	return arn[:j], true
}

func deadLetterURL(ctx context.Context, client queueURLGetter, redrive string) (string, error) {
	arn, ok := deadLetterARN(redrive)
	if !ok {
		return "", errors.New("it has no redrive policy with a dead-letter queue")
	}
	parts := strings.Split(arn, ":") // arn:aws:sqs:region:account:name
	if len(parts) != 6 {
		return "", fmt.Errorf("cannot read dead-letter queue ARN %q", arn)
	}
	out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &parts[5], QueueOwnerAWSAccountId: &parts[4]})
	if err != nil {
		return "", fmt.Errorf("cannot find dead-letter queue %s: %w", arn, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// dlqScopeSQS is what warnWiderDLQScope calls.
type dlqScopeSQS interface {
	queueURLGetter
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// warnWiderDLQScope warns about FIFO dead-letter queues that deduplicate
// more widely than their queues: a plain FIFO DLQ (DeduplicationScope=queue)
// of a queue deduplicating per message group, and a DLQ shared by several
// queues. There, two distinct messages with one dedup id are one: the
// worker's own moves give each copy a dedup id of its own
// (sqsmsg.CopyDeduplicationID), but a copy made by anything else that keeps a
// message's dedup id is silently dropped when the DLQ saw that id within
// five minutes. Best effort: a DLQ that cannot be read is skipped.
func warnWiderDLQScope(ctx context.Context, log *slog.Logger, client dlqScopeSQS, queues []queueInfo) {
	users := map[string][]string{} // DLQ ARN -> FIFO queues
	var arns []string
	perGroup := map[string][]string{} // DLQ ARN -> queues deduplicating per group
	for _, q := range queues {
		arn, ok := deadLetterARN(q.redrive)
		if !ok || !q.fifo {
			continue
		}
		if _, seen := users[arn]; !seen {
			arns = append(arns, arn)
		}
		users[arn] = append(users[arn], q.name)
		if q.perGroup {
			perGroup[arn] = append(perGroup[arn], q.name)
		}
	}
	for _, arn := range arns {
		dlq := arn[strings.LastIndexByte(arn, ':')+1:]
		if qs := users[arn]; len(qs) > 1 {
			log.Warn("queues share one FIFO dead-letter queue: it deduplicates their messages together, so a copy that keeps a message's dedup id can be dropped there as another queue's duplicate (the worker's own moves give each copy its own id)",
				"dlq", dlq, "queues", strings.Join(qs, ","))
		}
		if len(perGroup[arn]) == 0 {
			continue
		}
		url, err := deadLetterURL(ctx, client, `"deadLetterTargetArn":"`+arn+`"`)
		if err != nil {
			log.Debug("cannot read the dead-letter queue's deduplication scope", "dlq", dlq, "err", err)
			continue
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameDeduplicationScope},
		})
		if err != nil {
			log.Debug("cannot read the dead-letter queue's deduplication scope", "dlq", dlq, "err", err)
			continue
		}
		if scope := out.Attributes[string(sqstypes.QueueAttributeNameDeduplicationScope)]; scope != "messageGroup" {
			log.Warn("dead-letter queue deduplicates more widely than its queue (DeduplicationScope "+orQueue(scope)+" against messageGroup): two messages of two groups with one dedup id are one there, so a copy that keeps a message's dedup id can be dropped (the worker's own moves give each copy its own id); give the DLQ DeduplicationScope=messageGroup (worker setup --high-throughput --dlq does)",
				"dlq", dlq, "queues", strings.Join(perGroup[arn], ","))
		}
	}
}

func orQueue(scope string) string {
	if scope == "" {
		return "queue (standard queue)"
	}
	return scope
}

// maxReceive returns the maxReceiveCount of the queue's redrive policy, 0
// without one (SQS writes it as a number or a string).
func (q queueInfo) maxReceive() int {
	var p struct {
		Max json.RawMessage `json:"maxReceiveCount"`
	}
	if json.Unmarshal([]byte(q.redrive), &p) != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.Trim(string(p.Max), `"`))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
