package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/memdynamo"
	"github.com/exactlyonce/exactly/internal/memsqs"
	"github.com/exactlyonce/exactly/internal/outboxschema"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

// The group's head keeps SQS's sequence number of its last published
// message, so that a break a lost answer hid is caught on any later
// answer, not only on one that carries the run whole (docs/OUTBOX.md, "A
// hot group").

// tooLongOnce refuses the next n requests of more than one entry as SQS
// refuses one over 1 MiB.
type tooLongOnce struct {
	outbox.SQS
	mu sync.Mutex
	n  int
}

func (s *tooLongOnce) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	refuse := s.n > 0 && len(in.Entries) > 1
	if refuse {
		s.n--
	}
	s.mu.Unlock()
	if refuse {
		return nil, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.BatchRequestTooLong", Message: "Batch requests cannot be longer than 1048576 bytes."}
	}
	return s.SQS.SendMessageBatch(ctx, in, opts...)
}

// lostReorder writes a1 .. a5 and sweeps once: SQS refuses a3 and takes a4
// and a5, and the answer is lost. Then a sweep publishes a1 and a2 again
// while a3, a4 and a5 fail (inside SQS): only a1 and a2 are recorded, and
// the break is still hidden.
func lostReorder(t *testing.T, e *env, f *faultySQS, r *outbox.Relay) {
	t.Helper()
	ctx := context.Background()
	hotGroup(t, e, 5)
	f.failEntry, f.lose = map[string]int{"a3": 1}, 1
	round, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, round.Errors, "the answer was lost")
	f.failEntry = map[string]int{"a3": 1, "a4": 1, "a5": 1}
	round, err = r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, round.Published, "a1 and a2 again")
	require.Zero(t, round.Reordered, "nothing after a failed entry taken: the answer shows no break")
}

// heldAt asserts the group "a" is held at message seq for a break read
// from sequence numbers, SQS having had it before message before.
func heldAt(t *testing.T, e *env, seq int64, before string) {
	t.Helper()
	h, held, err := outbox.GroupHeld(context.Background(), e.db, e.table, e.q1, "a")
	require.NoError(t, err)
	require.True(t, held, "the break is caught: the group is held")
	require.Equal(t, seq, h.Seq)
	require.True(t, strings.HasPrefix(h.Why, outbox.ReorderedHold+": SQS had message "+before), h.Why)
}

// TestABreakALostAnswerHidIsCaughtWhenTheRunIsNotSentWhole: after the
// lost answer, a3 goes in another request than a4 (the request halved
// after BatchRequestTooLong, a3 sent alone after a release, or a3 and a4
// published in separate rounds). SQS answers a4's copy with its first
// sequence number, below a3's: the relay compares it with the number of
// the group's last published message (in the round, or kept on the head)
// and holds the group at a4.
func TestABreakALostAnswerHidIsCaughtWhenTheRunIsNotSentWhole(t *testing.T) {
	t.Run("the request halved", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			f := &faultySQS{sqsAPI: e.sqs}
			s := &tooLongOnce{SQS: f}
			r := &outbox.Relay{DB: e.db, SQS: s, Table: e.table, GroupBatch: 10}
			lostReorder(t, e, f, r)
			s.n = 1 // a3, a4, a5 refused as too long: a3 alone, then a4 and a5
			round, err := r.Sweep(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, round.Reordered)
			require.Equal(t, 1, round.Held)
			require.Equal(t, 1, round.Published, "a3")
			heldAt(t, e, 4, "4 before message 3")
		})
	})
	t.Run("the message alone after a release", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			f := &faultySQS{sqsAPI: e.sqs}
			r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
			hotGroup(t, e, 5)
			f.failEntry, f.lose = map[string]int{"a3": 1}, 1
			_, err := r.Sweep(ctx)
			require.NoError(t, err)
			// a3 refused for a reason the relay does not know (held), a4
			// and a5 failing inside SQS: nothing taken after a3 shows.
			f.refuse, f.refuseCode, f.failEntry = "a3", "SomethingNew", map[string]int{"a4": 1, "a5": 1}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Held)
			require.Zero(t, round.Reordered)
			f.refuse = ""
			require.NoError(t, outbox.Release(ctx, e.db, e.table, e.q1, "a", "id-a3"))
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Reordered)
			require.Equal(t, 1, round.Published, "a3, alone")
			heldAt(t, e, 4, "4 before message 3")
		})
	})
	t.Run("a3 and a4 in separate rounds", func(t *testing.T) {
		each(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			f := &faultySQS{sqsAPI: e.sqs}
			r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
			lostReorder(t, e, f, r)
			r.PerGroup = 1
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Published, "a3")
			require.Zero(t, round.Reordered)
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Reordered, "a4's number is below the one the head keeps, a3's")
			require.Zero(t, round.Published)
			heldAt(t, e, 4, "4 before message 3")
		})
	})
}

// racingSQS runs another relay's sweep once, after SQS answered this
// relay's first request and before the answer reaches it.
type racingSQS struct {
	outbox.SQS
	once  sync.Once
	other func()
}

func (s *racingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.SQS.SendMessageBatch(ctx, in, opts...)
	s.once.Do(s.other)
	return out, err
}

// TestTwoRelaysABreakOneSeesIsHeldByTheOther: relay X's request shows a
// break (a3 refused, a4 and a5 taken); before X records the hold, relay Y
// publishes a1 to a3 (a3 now taken, after a4 and a5) and records them
// first, so X's hold is lost. Y's next round publishes a4, whose copy SQS
// answers with its first number, below a3's on the head: the group is
// held.
func TestTwoRelaysABreakOneSeesIsHeldByTheOther(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		hotGroup(t, e, 5)
		f := &faultySQS{sqsAPI: e.sqs, failEntry: map[string]int{"a3": 1}}
		y := &outbox.Relay{DB: e.db, SQS: e.sqs, Table: e.table, GroupBatch: 10, PerGroup: 3}
		var yRound outbox.Round
		race := &racingSQS{SQS: f, other: func() {
			var err error
			yRound, err = y.Sweep(ctx)
			require.NoError(t, err)
		}}
		x := &outbox.Relay{DB: e.db, SQS: race, Table: e.table, GroupBatch: 10}
		round, err := x.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, yRound.Published, "a1, a2, a3")
		require.Equal(t, 1, round.Reordered, "X counted the break its answer showed")
		require.Zero(t, round.Held, "Y recorded first: X's hold is not written")

		y.PerGroup = 10
		round, err = y.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, round.Reordered)
		require.Equal(t, 1, round.Held)
		heldAt(t, e, 4, "4 before message 3")
	})
}

// failingTx fails the next n transactions (the relay's progress) with an
// error that says nothing of their outcome: not applied.
type failingTx struct {
	dbAPI
	n int
}

func (d *failingTx) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if d.n > 0 {
		d.n--
		return nil, errors.New("connection reset")
	}
	return d.dbAPI.TransactWriteItems(ctx, in, o...)
}

// TestOneAtATimeNeverHoldsOnACopyTakenAnew: a3's first copy is past SQS's
// five-minute deduplication window when it is sent again, a4's is not:
// SQS takes a3 anew, with a number above a4's first, and answers a4 as a
// duplicate with that first, lower number. One message per request, the
// group is in order at SQS whatever the numbers say: the default relay
// publishes on, holds nothing, counts nothing. With GroupBatch, the same
// answers in one request hold the group although it is in order (the
// known false hold of docs/OUTBOX.md).
func TestOneAtATimeNeverHoldsOnACopyTakenAnew(t *testing.T) {
	for _, gb := range []int{1, 10} {
		t.Run(map[int]string{1: "GroupBatch 1", 10: "GroupBatch 10"}[gb], func(t *testing.T) {
			ctx := context.Background()
			clock := memsqs.NewManualClock(time.Unix(1_800_000_000, 0))
			e := newEnv(t, memdynamo.New(), memsqs.New(memsqs.WithClock(clock)))
			hotGroup(t, e, 4)
			f := &faultySQS{sqsAPI: e.sqs}
			db := &failingTx{dbAPI: e.db}
			r := &outbox.Relay{DB: db, SQS: f, Table: e.table, GroupBatch: gb, PerGroup: 2}
			round, err := r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published, "a1, a2")
			f.lose, r.PerGroup = 1, 1 // a3 alone, its answer lost
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, round.Errors)
			clock.Advance(4 * time.Minute)
			db.n, r.PerGroup = 1, 2 // a3 (a copy) and a4 published, their progress lost
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, round.Published)
			require.Equal(t, 1, round.Errors)
			clock.Advance(90 * time.Second) // a3's first copy past five minutes, a4's not
			round, err = r.Sweep(ctx)
			require.NoError(t, err)
			_, held, err := outbox.GroupHeld(ctx, e.db, e.table, e.q1, "a")
			require.NoError(t, err)
			if gb == 1 {
				require.Equal(t, outbox.Round{Groups: 1, Published: 2, Lag: round.Lag}, round, "in order: nothing held or counted")
				require.False(t, held)
			} else {
				require.Equal(t, 1, round.Reordered)
				require.True(t, held, "the known false hold: a4's first number below a3's new one")
			}
			// What SQS did: a3 again, taken anew past the window. (A short
			// poll: a long one waits on the manual clock.)
			var bodies []string
			for {
				out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.q1, MaxNumberOfMessages: 10})
				require.NoError(t, err)
				if len(out.Messages) == 0 {
					break
				}
				for _, m := range out.Messages {
					bodies = append(bodies, *m.Body)
					_, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &e.q1, ReceiptHandle: m.ReceiptHandle})
					require.NoError(t, err)
				}
			}
			require.Equal(t, []string{"a1", "a2", "a3", "a4", "a3"}, bodies)
		})
	}
}

// TestAReorderedHoldReleasedOrDroppedIsNotHeldAgain: a break read from
// sequence numbers holds the group at a4 (SQS had a4 and a5 before a3,
// whose number the head now keeps). The operator releases the group, or
// drops a4: the relay publishes the rest without holding it again for
// the break the operator saw (Release and Drop clear the head's number).
func TestAReorderedHoldReleasedOrDroppedIsNotHeldAgain(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(map[bool]string{false: "released", true: "dropped"}[drop], func(t *testing.T) {
			each(t, func(t *testing.T, e *env) {
				ctx := context.Background()
				hotGroup(t, e, 6)
				f := &faultySQS{sqsAPI: e.sqs, failEntry: map[string]int{"a3": 1}, lose: 1}
				r := &outbox.Relay{DB: e.db, SQS: f, Table: e.table, GroupBatch: 10}
				_, err := r.Sweep(ctx)
				require.NoError(t, err)
				round, err := r.Sweep(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, round.Reordered)
				heldAt(t, e, 4, "4 before message 3")
				if drop {
					require.NoError(t, outbox.Drop(ctx, e.db, e.table, e.q1, "a", "id-a4"))
				} else {
					require.NoError(t, outbox.Release(ctx, e.db, e.table, e.q1, "a", "id-a4"))
				}
				round, err = r.Sweep(ctx)
				require.NoError(t, err)
				require.Zero(t, round.Reordered)
				require.Zero(t, round.Held)
				want := map[bool]int{false: 3, true: 2}[drop] // (a4,) a5, a6
				require.Equal(t, want, round.Published)
				_, held, err := outbox.GroupHeld(ctx, e.db, e.table, e.q1, "a")
				require.NoError(t, err)
				require.False(t, held)
				bodies, _ := e.received(t, e.q1)
				require.Equal(t, []string{"a1", "a2", "a4", "a5", "a6", "a3"}, bodies["a"], "what SQS did: a4 to a6 before a3 (the break held); their copies dropped")
			})
		})
	}
}

// headSQSSeq reads the number a group's head keeps ("" when none).
func headSQSSeq(t *testing.T, e *env, queue, group string) string {
	t.Helper()
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, ConsistentRead: aws.Bool(true), Key: map[string]ddbtypes.AttributeValue{
		outboxschema.AttrPK: &ddbtypes.AttributeValueMemberS{Value: queue + "#" + group}, outboxschema.AttrSK: &ddbtypes.AttributeValueMemberN{Value: "0"}}})
	require.NoError(t, err)
	require.NotNil(t, out.Item)
	if s, ok := out.Item[outboxschema.AttrSQSSeq].(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// TestTheHeadKeepsTheLastNumberOnFIFOQueuesOnly: the head keeps SQS's
// number of the group's last message published, at every GroupBatch; a
// standard queue's answers carry none, and its head keeps none.
func TestTheHeadKeepsTheLastNumberOnFIFOQueuesOnly(t *testing.T) {
	for _, gb := range []int{1, 10} {
		t.Run(fmt.Sprint("GroupBatch ", gb), func(t *testing.T) { keepsTheLastNumber(t, gb) })
	}
}

func keepsTheLastNumber(t *testing.T, gb int) {
	each(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		std, _ := testenv.NewQueue(t, e.sqs, false, nil, 0)
		ob := outbox.New(e.db, e.table)
		for i := 1; i <= 3; i++ {
			require.NoError(t, ob.Write(ctx, []outbox.Message{msg(e.q1, "a", fmt.Sprint("a", i)), {QueueURL: std, Body: fmt.Sprint("s", i), ID: fmt.Sprint("id-s", i)}}))
		}
		c := &seqRecorder{SQS: e.sqs}
		round, err := (&outbox.Relay{DB: e.db, SQS: c, Table: e.table, GroupBatch: gb}).Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 6, round.Published)
		require.Zero(t, round.Held)
		require.Equal(t, c.last, headSQSSeq(t, e, e.q1, "a"), "a3's number")
		require.NotEmpty(t, c.last)
		require.Empty(t, headSQSSeq(t, e, std, ""))
	})
}

// seqRecorder notes the last sequence number SQS answered.
type seqRecorder struct {
	outbox.SQS
	mu   sync.Mutex
	last string
}

func (s *seqRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.SQS.SendMessageBatch(ctx, in, opts...)
	if err == nil {
		s.mu.Lock()
		for _, x := range out.Successful {
			if n := aws.ToString(x.SequenceNumber); n != "" {
				s.last = n
			}
		}
		s.mu.Unlock()
	}
	return out, err
}
