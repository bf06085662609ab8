// Command quickstart is README.md's library snippet: a worker inside a
// program of its own. ORDERS_QUEUE_URL names the queue; AWS settings come
// from the SDK's standard sources.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly"
	"github.com/exactlyonce/exactly/effect"
)

// ship runs once per logical message, however often SQS delivers it.
func ship(ctx context.Context, in effect.Input) (effect.Output, error) {
	// Pass in.Key to the downstream as its idempotency key.
	log.Printf("shipping %s (key %s)", in.Message.Body, in.Key)
	return effect.Output{Result: []byte(`{"shipped":true}`)}, nil // replayed for duplicates
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w, err := exactly.New(ctx, exactly.Config{
		SQS:      sqs.NewFromConfig(cfg),
		DynamoDB: exactly.NewDynamoDBClient(cfg),
		Queues:   []string{os.Getenv("ORDERS_QUEUE_URL")},
		Table:    "exactly-dedup",
		Effect:   effect.Func(ship),
	})
	if err != nil {
		log.Fatal(err) // a *exactly.ConfigError names the setting and the fix
	}
	// Ctrl-C drains: running effects finish, unstarted messages go back.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
