package idempotency_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/idempotency"
)

// TestWrapRefusesOptionsThatFailEveryCall: an option that could only fail
// every call of the wrapped function makes Wrap (and WrapTx) panic at once,
// naming the option and the fix, instead of each call failing.
func TestWrapRefusesOptionsThatFailEveryCall(t *testing.T) {
	t.Parallel()
	l := newLedger(t, newDB(t))
	c := &charger{}
	type other struct{ ID string }
	for _, tc := range []struct {
		name string
		opt  idempotency.Option
		want string
	}{
		{"KeyFunc of another type", idempotency.KeyFunc(func(o other) string { return o.ID }),
			`idempotency: Wrap "charge": KeyFunc takes idempotency_test.other, but the function's input is idempotency_test.charge: pass a func(idempotency_test.charge) string`},
		{"KeyPointers not a pointer", idempotency.KeyPointers("order"),
			`idempotency: Wrap "charge": KeyPointers: "order" is not a JSON pointer: it must start with "/" ("/order")`},
		{"KeyPointers bad escape", idempotency.KeyPointers("/a~2b"),
			`idempotency: Wrap "charge": KeyPointers: "/a~2b" is not a JSON pointer: "~" must be followed by 0 (~) or 1 (/)`},
		{"ValidatePointers not a pointer", idempotency.ValidatePointers("/order", "amount"),
			`idempotency: Wrap "charge": ValidatePointers: "amount" is not a JSON pointer: it must start with "/" ("/amount")`},
		{"Expiry zero", idempotency.Expiry(0),
			`idempotency: Wrap "charge": Expiry(0s): a completed call must answer its duplicates for a positive time: pass a positive duration (Config.Expiry's default is 1h0m0s)`},
		{"Expiry negative", idempotency.Expiry(-time.Minute),
			`idempotency: Wrap "charge": Expiry(-1m0s): a completed call must answer its duplicates for a positive time: pass a positive duration (Config.Expiry's default is 1h0m0s)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.PanicsWithValue(t, tc.want, func() { idempotency.Wrap(l, "charge", c.charge, tc.opt) })
			require.PanicsWithValue(t, tc.want, func() {
				idempotency.WrapTx(l, "charge", txOf(c.charge), tc.opt)
			})
		})
	}
	// What is right is taken: a KeyFunc of an interface the input has, an
	// escaped pointer, the empty pointer (the whole document).
	require.NotPanics(t, func() {
		idempotency.Wrap(l, "charge", c.charge, idempotency.KeyFunc(func(s fmt.Stringer) string { return s.String() }),
			idempotency.ValidatePointers("", "/a~0b~1c"), idempotency.Expiry(time.Second))
	})
	require.Equal(t, int32(0), c.runs.Load())
}

func (c charge) String() string { return c.Order }

func txOf[In, Out any](fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, []types.TransactWriteItem, error) {
	return func(ctx context.Context, in In) (Out, []types.TransactWriteItem, error) {
		out, err := fn(ctx, in)
		return out, nil, err
	}
}
