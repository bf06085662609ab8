package cli_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// sendDeposits sends groups×per ledger messages, one account per group, seq
// 1..per in order, concurrently across groups, and returns the balances that
// applying each once gives.
func sendDeposits(t *testing.T, c *sqs.Client, url string, groups, per int) map[string]int64 {
	t.Helper()
	want := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	sem := make(chan struct{}, 8)
	for g := range groups {
		acct := fmt.Sprintf("g%03d", g)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var sum int64
			for start := 1; start <= per; start += 10 {
				var entries []sqstypes.SendMessageBatchRequestEntry
				for seq := start; seq < start+10 && seq <= per; seq++ {
					amt := int64(g*7 + seq)
					sum += amt
					entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
						Id:                     aws.String(strconv.Itoa(seq)),
						MessageBody:            aws.String(fmt.Sprintf(`{"account":%q,"amount_cents":%d,"seq":%d}`, acct, amt, seq)),
						MessageGroupId:         aws.String(acct),
						MessageDeduplicationId: aws.String(fmt.Sprintf("%s-%d", acct, seq)),
					})
				}
				out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("send failed: %s", aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			mu.Lock()
			want[acct] = sum
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return want
}

// entries returns the ledger's entry items per account, in applied order.
func entries(t *testing.T, db *dynamodb.Client, ledger string) map[string][]int {
	t.Helper()
	type e struct {
		seq       int
		appliedAt int64
	}
	by := map[string][]e{}
	for _, it := range scanAll(t, db, ledger) {
		pk := it["pk"].(*ddbtypes.AttributeValueMemberS).Value
		if len(pk) < 6 || pk[:6] != "entry#" {
			continue
		}
		seq, _ := strconv.Atoi(it["seq"].(*ddbtypes.AttributeValueMemberN).Value)
		at, _ := strconv.ParseInt(it["applied_at"].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
		acct := it["account"].(*ddbtypes.AttributeValueMemberS).Value
		by[acct] = append(by[acct], e{seq, at})
	}
	out := map[string][]int{}
	for acct, es := range by {
		sort.SliceStable(es, func(i, j int) bool { return es[i].appliedAt < es[j].appliedAt })
		for _, x := range es {
			out[acct] = append(out[acct], x.seq)
		}
	}
	return out
}

// requireExactlyOnceInOrder: every account's balance is what was sent once,
// each seq 1..per was applied exactly once, in order.
func requireExactlyOnceInOrder(t *testing.T, db *dynamodb.Client, ledger string, want map[string]int64, per int) {
	t.Helper()
	bs, err := cli.ReadBalances(context.Background(), db, ledger)
	require.NoError(t, err)
	require.Len(t, bs, len(want))
	for _, b := range bs {
		require.Equal(t, want[b.Account], b.BalanceCents, b.Account)
		require.EqualValues(t, per, b.Applied, b.Account)
		require.EqualValues(t, per, b.LastSeq, b.Account)
	}
	for acct, seqs := range entries(t, db, ledger) {
		require.Len(t, seqs, per, acct)
		for i, s := range seqs {
			require.Equal(t, i+1, s, "%s: application order %v", acct, seqs)
		}
	}
}

func balancesMatch(db *dynamodb.Client, ledger string, want map[string]int64) bool {
	bs, err := cli.ReadBalances(context.Background(), db, ledger)
	if err != nil || len(bs) != len(want) {
		return false
	}
	for _, b := range bs {
		if b.BalanceCents != want[b.Account] {
			return false
		}
	}
	return true
}

type tables struct{ url, dedup, ledger string }

func newStack(t *testing.T, sqsc *sqs.Client, db *dynamodb.Client, visibility string) tables {
	url, _ := testenv.NewQueue(t, sqsc, true, map[string]string{"VisibilityTimeout": visibility}, 5)
	return tables{url: url, dedup: testenv.NewTable(t, db, true), ledger: testenv.NewTable(t, db, false)}
}

// The pool's own emulator tests (internal/pool/e2e_test.go) prove order and
// exact balances under load in process; this one drives the real binary with
// a real signal.

// TestSIGTERMUnderLoadThenRestart: a worker stopped with SIGTERM mid-run exits
// 0 within its shutdown timeout; a restarted worker finishes the queue; the
// result is exact: nothing lost, nothing applied twice, order kept.
func TestSIGTERMUnderLoadThenRestart(t *testing.T) {
	sqsc, db := testenv.SQS(t), testenv.DynamoDB(t)
	s := newStack(t, sqsc, db, "30")
	const groups, per = 20, 50
	want := sendDeposits(t, sqsc, s.url, groups, per)
	args := []string{"run", "--queue", s.url, "--effect", "ledger", "--table", s.dedup, "--ledger-table", s.ledger,
		"--concurrency", "16", "--metrics-addr", "", "--progress", "0", "--shutdown-timeout", "10s", "--wait-time", "5s"}
	w := startWorker(t, args...)
	testenv.Eventually(t, 2*time.Minute, func() bool {
		bs, err := cli.ReadBalances(context.Background(), db, s.ledger)
		if err != nil {
			return false
		}
		var applied int64
		for _, b := range bs {
			applied += b.Applied
		}
		return applied >= groups*per/4
	}, "a quarter of the messages to be applied")
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	start := time.Now()
	select {
	case err := <-w.done:
		require.NoError(t, err, "exit 0 on SIGTERM")
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not exit within its 10s shutdown timeout (+5s)")
	}
	require.Less(t, time.Since(start), 12*time.Second)
	require.False(t, balancesMatch(db, s.ledger, want), "stopped before the end: the test proves nothing otherwise")

	startWorker(t, args...)
	testenv.Eventually(t, 3*time.Minute, func() bool { return balancesMatch(db, s.ledger, want) }, "balances after restart")
	testenv.Eventually(t, time.Minute, func() bool { return queueEmpty(t, sqsc, s.url) }, "the queue to drain")
	requireExactlyOnceInOrder(t, db, s.ledger, want, per)
}
