package worker_test

import (
	"context"
	"errors"
	"os"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/worker"
)

// A binary of your own: the stock command line (run, lambda, setup, send,
// redrive, inspect, ...) with an effect of yours, deployed as the worker
// is (--effect notify). The factory gets the worker's environment: its AWS
// configuration, an HTTP client, its own settings through Lookup.
func Example() {
	notify := func(env worker.Env) (effect.Effect, error) {
		topic, ok := env.Lookup("NOTIFY_TOPIC")
		if !ok {
			return nil, errors.New("NOTIFY_TOPIC is required by the notify effect")
		}
		return effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
			_ = topic // publish in.Message.Body, with in.Key as the idempotency key
			return effect.Output{}, nil
		}), nil
	}
	os.Exit(worker.Main(os.Args[1:], worker.Effects{"notify": notify}))
}
