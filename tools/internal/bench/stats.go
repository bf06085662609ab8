package bench

import (
	"math"
	"slices"
	"time"
)

// Percentiles returns the nearest-rank percentiles ps (0..1) of ds, which it
// does not modify. An empty ds gives zeros.
func Percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for i, p := range ps {
		rank := int(math.Ceil(p*float64(len(s)))) - 1
		out[i] = s[min(max(rank, 0), len(s)-1)]
	}
	return out
}
