package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

// redriveCommand moves messages from a dead-letter queue back to their queue
// (internal/redrive): same body, attributes, group and dedup key.
func redriveCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var cfg redrive.Config
	fs := config.NewSet("worker redrive", stderr, lookup)
	fs.String(&cfg.DLQ, "dlq", "", "", "URL of the dead-letter queue to move messages from (required)")
	fs.String(&cfg.Queue, "queue", "", "", "URL of the queue they came from, to move them to (required): their dedup keys are scoped by its name")
	fs.Int(&cfg.Max, "max", "", 0, "move at most this many messages (0: until the dead-letter queue is empty)")
	fs.List(&cfg.Groups, "group", "", "move only the messages of this FIFO group (repeat, or comma-separate); the others stay in the dead-letter queue")
	fs.Bool(&cfg.DryRun, "dry-run", "", false, "move nothing: list what would move, in order (group, message id, dedup key, when it reached the DLQ, why it failed). Listing receives the messages: their receive count rises and they are hidden until the listing ends; SQS hands out no more of a FIFO group while some of it is held, so each group is listed from its first message as far as a receive reaches")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case cfg.DLQ == "" || cfg.Queue == "":
		return config.Errorf("--dlq and --queue are required: the dead-letter queue's URL and that of the queue its messages came from")
	case cfg.Max < 0:
		return config.Errorf("--max must not be negative")
	}
	if err := cfg.Validate(); err != nil {
		return config.Errorf("--dlq and --queue: %v", err)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	res, err := redrive.Run(ctx, cl.sqs, cfg)
	if cfg.DryRun {
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tMESSAGE ID\tDEDUP KEY\tIN DLQ SINCE\tFAILED AT\tFAILURE")
		for _, l := range res.Listed {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", orDash(l.Group), l.ID, orDash(l.Key), l.SentAt.UTC().Format(time.RFC3339), orDash(l.FailedAt), orDash(l.Failure))
		}
		_ = tw.Flush()
		fmt.Fprintf(stdout, "dry run: would move %d messages from %s to %s", len(res.Listed), sqsmsg.QueueName(cfg.DLQ), sqsmsg.QueueName(cfg.Queue))
	} else {
		fmt.Fprintf(stdout, "moved %d messages from %s to %s", res.Moved, sqsmsg.QueueName(cfg.DLQ), sqsmsg.QueueName(cfg.Queue))
	}
	if res.Skipped > 0 {
		fmt.Fprintf(stdout, "; left %d of other groups", res.Skipped)
	}
	if res.Left > 0 {
		fmt.Fprintf(stdout, "; left %d that reached %s after the start (failed again?)", res.Left, sqsmsg.QueueName(cfg.DLQ))
	}
	fmt.Fprintln(stdout)
	if err != nil {
		if d := denied(err, "sqs:ReceiveMessage and sqs:DeleteMessage on the DLQ, sqs:SendMessage on the queue", cfg.DLQ+" -> "+cfg.Queue); d != err { //nolint:errorlint // denied returns err itself unless it is an access denial
			return d
		}
		return fmt.Errorf("redrive stopped: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
