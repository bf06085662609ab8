package exactlytest_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
)

// TestFakesOfferEveryMethod: the test kit's SQS and DynamoDB have every
// method of the in-memory fakes they wrap, with the same signature (a type
// of the fake's own package named as the kit's), so a user gets all that
// the project's own tests get (and go doc lists it).
func TestFakesOfferEveryMethod(t *testing.T) {
	t.Parallel()
	for inner, outer := range map[reflect.Type]reflect.Type{
		reflect.TypeFor[*memsqs.Server](): reflect.TypeFor[*exactlytest.SQS](),
		reflect.TypeFor[*memdynamo.DB]():  reflect.TypeFor[*exactlytest.DynamoDB](),
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
