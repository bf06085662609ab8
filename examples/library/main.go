// Command library runs the exactly-once worker inside a service of its own:
// its own effect as a plain func, its own logger and Prometheus registry,
// its own signal handling.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
)

// notify sends one notification per order; in.Key goes to the provider as
// its idempotency key, so that even a redelivery after a crash is one send.
func notify(ctx context.Context, in effect.Input) (effect.Output, error) {
	slog.InfoContext(ctx, "notify", "order", in.Message.Body, "idempotency_key", in.Key)
	return effect.Output{Result: []byte(`{"sent":true}`)}, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		slog.Error("aws config", "err", err)
		os.Exit(1)
	}
	w, err := exactly.New(ctx, exactly.Config{
		SQS:        sqs.NewFromConfig(cfg),
		DynamoDB:   exactly.NewDynamoDBClient(cfg),
		Queues:     []string{os.Getenv("ORDERS_QUEUE_URL")},
		Table:      "exactly-dedup",
		Effect:     effect.Func(notify),
		KeySource:  "json:/order_id",
		Registerer: prometheus.DefaultRegisterer,
		Logger:     slog.Default(),
	})
	if err != nil {
		slog.Error("start", "err", err) // a *exactly.ConfigError names the setting
		os.Exit(2)
	}
	// The first signal drains (running effects finish; an idle queue's
	// long polls are abandoned at once); a second one cancels running
	// effects and abandons every open poll (see the list below for what
	// that hides).
	drained := make(chan struct{})
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		select {
		case <-again:
			slog.Warn("second signal: cancelling running effects")
			_ = w.StopAndCancel(context.Background())
		case <-drained:
		}
	}()
	err = w.Run(ctx) // returns once drained
	close(drained)
	if err != nil {
		slog.Error("run", "err", err)
		os.Exit(1)
	}
}
