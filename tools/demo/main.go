// Command demo supports `make run` and `make tf-apply-local`: `burst` writes
// the demo messages (with duplicates of both kinds) as NDJSON for `worker
// send`; `report` waits until the queue is drained, then prints the ledger's
// balances next to what was sent once (and, with -dlq, checks that the DLQ
// holds the poison message and nothing else); `leftovers` lists the queues
// and tables whose names start with a prefix and fails if there are any;
// `fanout` creates an SNS FIFO topic with the given queues subscribed (raw
// delivery on, or off for -envelope-queue) and prints its ARN.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/outbox"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo burst|report|leftovers|fanout [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "burst":
		err = burst(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	case "leftovers":
		err = leftovers(os.Args[2:])
	case "fanout":
		err = fanout(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type line struct {
	Group   string `json:"group"`
	DedupID string `json:"dedup_id"`
	Key     string `json:"key,omitempty"`
	Body    string `json:"body"`
}

// burst writes deposits for a few accounts (one message group each, seq
// 1..n), then duplicates: exact resends (same MessageDeduplicationId, which
// SQS drops inside its five-minute window) and producer retries after the
// window (same idempotency-key, new MessageDeduplicationId, which only the
// ledger catches); and one poison message that ends in the DLQ.
func burst(args []string) error {
	fs := flag.NewFlagSet("burst", flag.ExitOnError)
	run := fs.String("run", strconv.FormatInt(time.Now().Unix(), 10), "run id, prefixed to accounts")
	accounts := fs.Int("accounts", 5, "accounts (one message group each)")
	per := fs.Int("per-account", 8, "deposits per account")
	out := fs.String("out", "burst.ndjson", "messages file")
	expect := fs.String("expect", "expected.txt", "expected balances file")
	_ = fs.Parse(args)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var msgs, dups []line
	expected := map[string]int64{}
	for a := 1; a <= *accounts; a++ {
		acct := fmt.Sprintf("r%s-acct%d", *run, a)
		for seq := 1; seq <= *per; seq++ {
			amt := int64(100 * (1 + rng.IntN(50)))
			body := fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, amt, seq)
			id := fmt.Sprintf("%s-dep%d", acct, seq)
			m := line{Group: acct, DedupID: id, Key: id, Body: body}
			msgs = append(msgs, m)
			expected[acct] += amt
			switch seq % 4 {
			case 1: // an exact resend: same dedup id, dropped by SQS
				dups = append(dups, m)
			case 2: // a producer retry after the window: same key, new dedup id
				r := m
				r.DedupID = id + "-retry"
				dups = append(dups, r)
			}
		}
	}
	msgs = append(msgs, dups...)
	msgs = append(msgs, line{Group: "r" + *run + "-poison", DedupID: "r" + *run + "-poison", Body: `{"account": 42}`})
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	var b strings.Builder
	for a := 1; a <= *accounts; a++ {
		acct := fmt.Sprintf("r%s-acct%d", *run, a)
		fmt.Fprintf(&b, "%s %d %d\n", acct, expected[acct], *per)
	}
	fmt.Printf("%d messages: %d deposits over %d accounts, %d duplicates (half exact resends, half retries with a new dedup id), 1 poison message\n",
		len(msgs), *accounts**per, *accounts, len(dups))
	return os.WriteFile(*expect, []byte(b.String()), 0o644)
}

func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	queue := fs.String("queue", "", "queue URL")
	ledger := fs.String("ledger-table", "exactly-ledger", "ledger table")
	expect := fs.String("expect", "expected.txt", "expected balances file")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the queue to drain")
	outboxTable := fs.String("outbox-table", "", "first wait until this outbox has nothing left to publish")
	dlq := fs.String("dlq", "", "DLQ URL: then check that it holds the burst's poison message and nothing else")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	if *outboxTable != "" {
		db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
		if err := waitPublished(ctx, db, *outboxTable); err != nil {
			return err
		}
	}
	if err := waitDrained(ctx, sqs.NewFromConfig(cfg), *queue); err != nil {
		return err
	}
	raw, err := os.ReadFile(*expect)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	got, err := cli.ReadBalances(ctx, db, *ledger)
	if err != nil {
		return err
	}
	byAcct := map[string]cli.Balance{}
	for _, b := range got {
		byAcct[b.Account] = b
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "account\tsent once\tbalance\tapplied\t")
	ok := true
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var acct string
		var want, n int64
		if _, err := fmt.Sscan(l, &acct, &want, &n); err != nil {
			return fmt.Errorf("expected file: %w", err)
		}
		b := byAcct[acct]
		mark := "ok"
		if b.BalanceCents != want || b.Applied != n {
			mark, ok = "MISMATCH", false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d\t%s\n", acct, cents(want), cents(b.BalanceCents), b.Applied, n, mark)
	}
	_ = tw.Flush()
	if !ok {
		return fmt.Errorf("balances differ from what was sent once")
	}
	fmt.Printf("every balance in %s equals the sum of the deposits sent once: duplicates were absorbed\n", *ledger)
	if *dlq != "" {
		return checkDLQ(ctx, sqs.NewFromConfig(cfg), *dlq)
	}
	return nil
}

// checkDLQ reads the DLQ without hiding its messages (visibility 0) and
// wants exactly one: the burst's poison message, whose group ends in -poison.
func checkDLQ(ctx context.Context, client *sqs.Client, url string) error {
	var groups []string
	seen := map[string]bool{}
	for range 3 {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 0, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			return err
		}
		for _, m := range out.Messages {
			if !seen[aws.ToString(m.MessageId)] {
				seen[aws.ToString(m.MessageId)] = true
				groups = append(groups, m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)])
			}
		}
	}
	if len(groups) != 1 || !strings.HasSuffix(groups[0], "-poison") {
		return fmt.Errorf("DLQ %s: want the poison message alone, got %d message(s) of groups %q", url, len(groups), groups)
	}
	fmt.Printf("the DLQ holds the poison message (group %s) and nothing else\n", groups[0])
	return nil
}

// leftovers lists the queues and tables whose names start with -prefix and
// fails if there are any: what terraform destroy must have left.
func leftovers(args []string) error {
	fs := flag.NewFlagSet("leftovers", flag.ExitOnError)
	prefix := fs.String("prefix", "", "name prefix of the queues and tables to look for")
	_ = fs.Parse(args)
	if *prefix == "" {
		return fmt.Errorf("leftovers: give -prefix")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	var left []string
	queues, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: prefix})
	if err != nil {
		return err
	}
	for _, u := range queues.QueueUrls {
		if strings.HasPrefix(path.Base(u), *prefix) { // whether or not the emulator filters
			left = append(left, "queue "+u)
		}
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	for p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, name := range page.TableNames {
			if strings.HasPrefix(name, *prefix) {
				left = append(left, "table "+name)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
	}
	fmt.Printf("no queue or table named %s* is left\n", *prefix)
	return nil
}

func cents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// waitPublished polls the outbox until nothing is pending twice in a row.
func waitPublished(ctx context.Context, db *dynamodb.Client, table string) error {
	for quiet := 0; quiet < 2; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("outbox not published: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		pending, err := outbox.ListPending(ctx, db, table, 1)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// waitDrained polls the queue until no message is visible or in flight twice in a row.
func waitDrained(ctx context.Context, client *sqs.Client, url string) error {
	quiet := 0
	for quiet < 2 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue not drained: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			},
		})
		if err != nil {
			return err
		}
		if out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// queueList is a repeatable -queue flag.
type queueList []string

func (q *queueList) String() string     { return strings.Join(*q, ",") }
func (q *queueList) Set(v string) error { *q = append(*q, v); return nil }

// fanout creates the FIFO topic (content-based deduplication off: the relay
// sends every message's deduplication id) and subscribes each queue to it,
// -queue with raw delivery on and -envelope-queue with it off (the body is
// SNS's JSON envelope), once: a queue already subscribed (a stack left
// running from an earlier demo) is not subscribed again, its raw delivery
// set as asked. It prints the topic's ARN.
// The local stack checks no queue policy, so none is written: on AWS the
// topic module writes the grant each queue needs.
func fanout(args []string) error {
	fs := flag.NewFlagSet("fanout", flag.ExitOnError)
	name := fs.String("topic", "exactly-demo-confirmations-topic.fifo", "topic name (FIFO: ends in .fifo)")
	var queues, envelopes queueList
	fs.Var(&queues, "queue", "URL of a queue to subscribe with raw message delivery on (repeat for each)")
	fs.Var(&envelopes, "envelope-queue", "URL of a queue to subscribe with raw message delivery off (repeat for each)")
	_ = fs.Parse(args)
	if !strings.HasSuffix(*name, ".fifo") || len(queues)+len(envelopes) == 0 {
		return fmt.Errorf("fanout: want -topic <name>.fifo and at least one -queue or -envelope-queue")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	topics, queuesAPI := sns.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	t, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: name,
		Attributes: map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "false"}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", *name, err)
	}
	subscribed := map[string]string{} // queue ARN: subscription ARN
	subs, err := topics.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: t.TopicArn})
	if err != nil {
		return fmt.Errorf("list the subscriptions of %s: %w", *name, err)
	}
	for _, s := range subs.Subscriptions {
		subscribed[aws.ToString(s.Endpoint)] = aws.ToString(s.SubscriptionArn)
	}
	raw := map[string]bool{}
	for _, url := range queues {
		raw[url] = true
	}
	for _, url := range append(queues, envelopes...) {
		a, err := queuesAPI.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return fmt.Errorf("queue %s: %w", url, err)
		}
		arn := a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		rawDelivery := strconv.FormatBool(raw[url])
		if sub := subscribed[arn]; sub != "" {
			if _, err := topics.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{SubscriptionArn: aws.String(sub),
				AttributeName: aws.String("RawMessageDelivery"), AttributeValue: aws.String(rawDelivery)}); err != nil {
				return fmt.Errorf("set the raw delivery of %s's subscription to %s: %w", url, *name, err)
			}
			continue
		}
		if _, err := topics.Subscribe(ctx, &sns.SubscribeInput{TopicArn: t.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn),
			Attributes: map[string]string{"RawMessageDelivery": rawDelivery}}); err != nil {
			return fmt.Errorf("subscribe %s to %s: %w", url, *name, err)
		}
	}
	fmt.Println(aws.ToString(t.TopicArn))
	return nil
}
