package worker_test

import (
	"context"
	"os"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/worker"
)

// A binary of your own: the stock command line (run, lambda, setup, send,
// redrive, inspect, ...) with an effect of yours, deployed as the worker
// is (--effect notify).
func Example() {
	effect.Register("notify", func(env effect.Env) (effect.Effect, error) {
		return effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			// Send in.Message.Body, with in.Key as the idempotency key.
			return effect.Output{}, nil
		}), nil
	})
	os.Exit(worker.Main(os.Args[1:]))
}
