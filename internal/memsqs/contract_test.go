package memsqs_test

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/memsqs/sqscontract"
	"github.com/exactlyonce/exactly/internal/pool"
	"github.com/exactlyonce/exactly/internal/testenv"
)

var (
	_ pool.SQS           = (*memsqs.Server)(nil)
	_ sqscontract.Client = (*memsqs.Server)(nil)
)

func TestContractMemory(t *testing.T) {
	t.Parallel()
	s := memsqs.New()
	sqscontract.Run(t, sqscontract.Target{
		Client: s,
		NewQueue: func(t testing.TB, fifo bool, attrs map[string]string, maxReceive int) (string, string) {
			return memsqs.NewQueue(t, s, fifo, attrs, maxReceive)
		},
	})
}

// TestContractEmulator runs the contract against the local SQS (fauxqs), with
// its known deviations from AWS declared.
func TestContractEmulator(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	sqscontract.Run(t, sqscontract.Target{
		Client: c,
		NewQueue: func(t testing.TB, fifo bool, attrs map[string]string, maxReceive int) (string, string) {
			return testenv.NewQueue(t, c, fifo, attrs, maxReceive)
		},
		Quirks: sqscontract.Quirks{OneMessagePerGroup: true, DeleteAcceptsInvalidReceipts: true, DedupScopeIgnored: true, AttemptIDIgnored: true,
			// fauxqs takes these past AWS's documented limits (AWS's API
			// reference: SendMessage's MessageAttributes, MessageGroupId,
			// MessageDeduplicationId and DelaySeconds; SendMessageBatch's
			// entry Id's length). See docs/DESIGN.md, Limits.
			Unenforced: []sqscontract.Limit{sqscontract.LimitAttributes, sqscontract.LimitAttributeName,
				sqscontract.LimitMessageIDs, sqscontract.LimitDelay, sqscontract.LimitBatchEntryIDLength}},
	})
}
