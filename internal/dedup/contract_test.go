package dedup_test

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/dedup/dedupcontract"
	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/testenv"
)

var _ dedupcontract.DB = (*memdynamo.DB)(nil)

// TestContract runs the ledger's contract against the in-memory DynamoDB
// and against DynamoDB Local: the same suite, the same expectations.
func TestContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		dedupcontract.Run(t, memdynamo.New(), dedupcontract.Options{RaceGoroutines: 32, RaceRounds: 150})
	})
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		dedupcontract.Run(t, testenv.DynamoDB(t), dedupcontract.Options{RaceGoroutines: 16, RaceRounds: 30})
	})
}
