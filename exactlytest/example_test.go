package exactlytest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/exactlytest"
)

// An effect's test: a redelivery and a producer's retry are absorbed, and
// the same order with another amount is a conflict, all without AWS.
func ExampleHarness() {
	t := &testing.T{} // in a test, the test's own t
	charges := 0
	charge := effect.Func(func(ctx context.Context, in effect.Input) (effect.Output, error) {
		charges++
		return effect.Output{}, nil
	})
	h := exactlytest.New(t, charge, exactlytest.KeySource("json:/order"))
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":5}`)).Outcome)
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":5}`)).Outcome)
	fmt.Println(h.Deliver(exactlytest.Msg(`{"order":"o-1","amount":9}`)).Outcome)
	fmt.Println("charges:", charges)
	// Output:
	// applied
	// duplicate
	// conflict
	// charges: 1
}
