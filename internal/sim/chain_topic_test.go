package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChainTopicWorld runs chain seed 41, a topic world with a zombie
// relay (chain_topic.go) and faults on PublishBatch: the zombie's stalled
// PublishBatch is made past the deduplication windows, and the run is
// green (both subscribers apply every confirmation once, their ledgers
// equal). Red with plant (b) or (c) of docs/TESTING.md (the zombie's copies
// applied again), and if the seed stops drawing such a world.
func TestChainTopicWorld(t *testing.T) {
	kinds, _ := ParseKinds("")
	ops, _ := ParseOps("")
	res := runChainSeed(t, Config{Seed: 41, Rate: rate(), Kinds: kinds, Ops: ops})
	require.Empty(t, res.Violations)
	require.Equal(t, 1, res.Stats["topic: worlds"])
	require.Equal(t, 1, res.Stats["topic: zombie relay stalled"])
	published := 0
	for _, f := range res.Faults {
		if strings.HasPrefix(f.ID, "PublishBatch|") {
			published++
		}
	}
	require.Positive(t, published, "no fault on PublishBatch in seed 41")
}
