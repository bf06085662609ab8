package cli

import (
	"context"
	"fmt"
	"io"

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
	res, err := redrive.Run(ctx, cl.sqs, cfg)
	fmt.Fprintf(stdout, "moved %d messages from %s to %s", res.Moved, sqsmsg.QueueName(cfg.DLQ), sqsmsg.QueueName(cfg.Queue))
	if res.Left > 0 {
		fmt.Fprintf(stdout, "; left %d that reached %s after the start (failed again?)", res.Left, sqsmsg.QueueName(cfg.DLQ))
	}
	fmt.Fprintln(stdout)
	if err != nil {
		if d := denied(err, "sqs:ReceiveMessage and sqs:DeleteMessage on the DLQ, sqs:SendMessage on the queue", cfg.DLQ+" -> "+cfg.Queue); d != err {
			return d
		}
		return fmt.Errorf("redrive stopped: %w", err)
	}
	return nil
}
