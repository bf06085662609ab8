package effect_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/effect"
)

// An effect as a plain function: it receives the message and its scoped
// dedup key (pass it downstream as the idempotency key) and steers a
// failure with Permanent (to the dead-letter queue) or RetryAfter.
func ExampleFunc() {
	charge := effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
		switch in.Message.Body {
		case "":
			return effect.Output{}, effect.Permanent(errors.New("empty order"))
		case "busy":
			return effect.Output{}, effect.RetryAfter(30*time.Second, errors.New("payment provider busy"))
		}
		return effect.Output{Result: []byte("charged " + in.Message.Body)}, nil
	})
	for _, body := range []string{"o-1", "", "busy"} {
		out, err := charge.Apply(context.Background(), effect.Input{Message: effect.Message{Body: body}, Key: "exactly#orders.fifo#" + body})
		fmt.Printf("%q: result %q, permanent %v, retry after %v\n", body, out.Result, effect.IsPermanent(err), effect.RetryDelay(err))
	}
	// Output:
	// "o-1": result "charged o-1", permanent false, retry after 0s
	// "": result "", permanent true, retry after 0s
	// "busy": result "", permanent false, retry after 30s
}

// An effect whose whole effect is its DynamoDB writes declares it with
// WritesFunc: the worker then commits it optimistically, its writes and the
// dedup record in one transaction, one request per message.
func ExampleWritesFunc() {
	var e effect.Effect = effect.WritesFunc(func(ctx context.Context, in effect.Input) (effect.Output, error) {
		return effect.Output{ /* Writes: the message's DynamoDB writes */ }, nil
	})
	_, writesOnly := e.(effect.WritesOnly)
	fmt.Println("writes only:", writesOnly)
	// Output:
	// writes only: true
}
