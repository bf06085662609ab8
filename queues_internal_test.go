package exactly

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMaxReceiveOfARedrivePolicy: SQS writes maxReceiveCount as a string
// or a number; a queue without a policy has no limit (0).
func TestMaxReceiveOfARedrivePolicy(t *testing.T) {
	t.Parallel()
	for redrive, want := range map[string]int{
		`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:d.fifo","maxReceiveCount":"15"}`: 15,
		`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:d.fifo","maxReceiveCount":7}`:    7,
		`{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:1:d.fifo"}`:                        0,
		``:         0,
		`not json`: 0,
	} {
		require.Equal(t, want, queueInfo{redrive: redrive}.maxReceive(), redrive)
	}
}
