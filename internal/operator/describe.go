package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// QueueReader reads a queue's attributes and finds a queue's URL.
type QueueReader interface {
	QueueAttrReader
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// Depth is how many messages a queue holds, as SQS approximates them.
type Depth struct{ Visible, InFlight, Delayed int }

// QueueInfo describes a queue as an operator reads it.
type QueueInfo struct {
	URL, Name string
	FIFO      bool
	// DedupScope is "queue" or "messageGroup" (FIFO queues); "" otherwise.
	DedupScope string
	Depth
	// DLQURL is the dead-letter queue of its redrive policy ("" when none),
	// MaxReceives its maxReceiveCount.
	DLQURL      string
	MaxReceives int
	DLQDepth    Depth
}

// DescribeQueue reads a queue's attributes and, when it has a redrive
// policy, its dead-letter queue's depth.
func DescribeQueue(ctx context.Context, c QueueReader, url string) (QueueInfo, error) {
	qi := QueueInfo{URL: url, Name: sqsmsg.QueueName(url), FIFO: sqsmsg.IsFIFO(url)}
	attrs, err := readAttrs(ctx, c, url)
	if err != nil {
		return qi, err
	}
	qi.Depth = depth(attrs)
	qi.DedupScope = attrs[string(sqstypes.QueueAttributeNameDeduplicationScope)]
	if raw := attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)]; raw != "" {
		var p struct {
			Target string `json:"deadLetterTargetArn"`
			Max    any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return qi, fmt.Errorf("queue %s: cannot read its redrive policy %q: %w", qi.Name, raw, err)
		}
		qi.MaxReceives, _ = strconv.Atoi(strings.Trim(fmt.Sprint(p.Max), `"`))
		// arn:partition:sqs:region:account:name
		parts := strings.Split(p.Target, ":")
		if len(parts) != 6 {
			return qi, fmt.Errorf("queue %s: its redrive policy names %q, not a queue ARN", qi.Name, p.Target)
		}
		out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &parts[5], QueueOwnerAWSAccountId: &parts[4]})
		if err != nil {
			return qi, fmt.Errorf("queue %s: cannot find its dead-letter queue %s: %w", qi.Name, parts[5], err)
		}
		qi.DLQURL = aws.ToString(out.QueueUrl)
		dattrs, err := readAttrs(ctx, c, qi.DLQURL)
		if err != nil {
			return qi, err
		}
		qi.DLQDepth = depth(dattrs)
	}
	return qi, nil
}

func readAttrs(ctx context.Context, c QueueAttrReader, url string) (map[string]string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		return nil, fmt.Errorf("cannot read queue %s: %w", sqsmsg.QueueName(url), err)
	}
	return out.Attributes, nil
}

func depth(attrs map[string]string) Depth {
	n := func(a sqstypes.QueueAttributeName) int { v, _ := strconv.Atoi(attrs[string(a)]); return v }
	return Depth{
		Visible:  n(sqstypes.QueueAttributeNameApproximateNumberOfMessages),
		InFlight: n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:  n(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}
}

// TableDescriber describes a table and its TTL.
type TableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// TableInfo describes a table as an operator reads it: DynamoDB's item
// count and size are updated about every six hours.
type TableInfo struct {
	Name       string
	Items      int64
	Bytes      int64
	TTL        bool
	TTLAttr    string
	BillingPPR bool
}

// DescribeTable reads a table's approximate size and whether TTL is on.
func DescribeTable(ctx context.Context, db TableDescriber, table string) (TableInfo, error) {
	ti := TableInfo{Name: table}
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return ti, fmt.Errorf("cannot describe table %s: %w", table, err)
	}
	ti.Items, ti.Bytes = aws.ToInt64(d.Table.ItemCount), aws.ToInt64(d.Table.TableSizeBytes)
	if b := d.Table.BillingModeSummary; b != nil {
		ti.BillingPPR = b.BillingMode == ddbtypes.BillingModePayPerRequest
	}
	t, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return ti, fmt.Errorf("cannot read the TTL of table %s: %w", table, err)
	}
	if s := t.TimeToLiveDescription; s != nil {
		ti.TTL = s.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled
		ti.TTLAttr = aws.ToString(s.AttributeName)
	}
	return ti, nil
}
