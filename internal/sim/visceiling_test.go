package sim

import (
	"fmt"
	"testing"
	"testing/synctest"
)

// TestVisibilityCeiling runs the ceiling world (visceiling.go) on seeds 1
// to 6: each effect once, the group's order, and no extension past SQS's
// 12 hours from the receive.
func TestVisibilityCeiling(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				violations, stats := visCeiling(seed)
				t.Logf("%v", stats)
				for _, v := range violations {
					t.Error(v)
				}
			})
		})
	}
}
