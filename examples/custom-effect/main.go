// Command custom-effect is the worker with an effect of its own, as README.md
// shows: register it, then hand over to the worker's command line.
//
//	go run ./examples/custom-effect run --queue URL --effect email
package main

import (
	"context"
	"errors"
	"os"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/worker"
)

type sendEmail struct{}

func (sendEmail) Apply(ctx context.Context, in effect.Input) (effect.Output, error) {
	if in.Message.Body == "" {
		return effect.Output{}, effect.Permanent(errors.New("empty body")) // to the DLQ
	}
	// Pass in.Key downstream as the idempotency key.
	// Return effect.RetryAfter(d, err) to retry no sooner than d; any other
	// error is retried with backoff.
	return effect.Output{Result: []byte(`{"sent":true}`)}, nil
}

func main() {
	effect.Register("email", func(effect.Env) (effect.Effect, error) { return sendEmail{}, nil })
	os.Exit(worker.Main(os.Args[1:]))
}
