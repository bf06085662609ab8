package memsns_test

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/memsns"
	"github.com/exactlyonce/exactly/internal/memsns/snscontract"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/testenv"
)

var (
	_ snscontract.SNS = (*memsns.Server)(nil)
	_ snscontract.SQS = (*memsqs.Server)(nil)
	_ memsns.SQS      = (*memsqs.Server)(nil)
)

func TestContractMemory(t *testing.T) {
	t.Parallel()
	q := memsqs.New()
	snscontract.Run(t, snscontract.Target{
		SNS: memsns.New(q),
		SQS: q,
		NewQueue: func(t testing.TB, fifo bool) string {
			url, _ := memsqs.NewQueue(t, q, fifo, nil, 0)
			return url
		},
	})
}

// TestContractEmulator runs the contract against fauxqs's SNS (the same
// endpoint as its SQS), with its known deviations from AWS declared.
func TestContractEmulator(t *testing.T) {
	t.Parallel()
	q := testenv.SQS(t)
	s := testenv.SNS(t)
	snscontract.Run(t, snscontract.Target{
		SNS: s,
		SQS: q,
		NewQueue: func(t testing.TB, fifo bool) string {
			url, _ := testenv.NewQueue(t, q, fifo, nil, 0)
			return url
		},
		Quirks: snscontract.Quirks{NoSequenceNumber: true,
			// fauxqs 2.4.1 takes these past SNS's documented limits (AWS's
			// API reference: Publish's MessageDeduplicationId, PublishBatch's
			// total size, Subscribe of a FIFO queue to a standard topic; the
			// developer guide's raw delivery of at most 10 attributes). See
			// docs/DESIGN.md, Limits.
			Unenforced: []snscontract.Limit{snscontract.LimitMessageIDLength, snscontract.LimitBatchSize,
				snscontract.LimitStandardToFIFO, snscontract.LimitRawAttributes}},
	})
}
