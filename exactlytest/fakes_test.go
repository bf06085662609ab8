package exactlytest_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/internal/memsns/snscontract"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// TestFakesOfferEveryMethod: the test kit's SQS, SNS and DynamoDB have every
// method of the in-memory fakes they wrap, with the same signature (a type
// of the fake's own package named as the kit's), so a user gets all that
// the project's own tests get (and go doc lists it).
func TestFakesOfferEveryMethod(t *testing.T) {
	t.Parallel()
	for inner, outer := range map[reflect.Type]reflect.Type{
		reflect.TypeFor[*memsqs.Server](): reflect.TypeFor[*exactlytest.SQS](),
		reflect.TypeFor[*memdynamo.DB]():  reflect.TypeFor[*exactlytest.DynamoDB](),
		reflect.TypeFor[*memsns.Server](): reflect.TypeFor[*exactlytest.SNS](),
	} {
		for i := range inner.NumMethod() {
			m := inner.Method(i)
			got, ok := outer.MethodByName(m.Name)
			require.True(t, ok, "%s lacks %s of %s", outer, m.Name, inner)
			own := strings.TrimPrefix(inner.Elem().PkgPath(), "github.com/exactlyonce/exactly/internal/") + "."
			want := strings.ReplaceAll(m.Type.String()[len("func(")+len(inner.String()):], own, "exactlytest.")
			require.Equal(t, want, got.Type.String()[len("func(")+len(outer.String()):],
				"%s.%s has another signature than %s's", outer, m.Name, inner)
		}
	}
}

// TestSNSPassesTheContract: the test kit's SNS, delivering to the kit's
// SQS, passes the contract suite that holds memsns to the SNS emulator.
func TestSNSPassesTheContract(t *testing.T) {
	t.Parallel()
	q := exactlytest.NewSQS()
	snscontract.Run(t, snscontract.Target{
		SNS: exactlytest.NewSNS(q),
		SQS: q,
		NewQueue: func(t testing.TB, fifo bool) string {
			name := fmt.Sprintf("contract-%d", queues.Add(1))
			if fifo {
				name += ".fifo"
			}
			url, _ := exactlytest.NewQueue(t, q, name, 0)
			return url
		},
	})
}

var queues atomic.Int64
