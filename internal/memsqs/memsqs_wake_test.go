package memsqs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/exactlyonce/exactly/internal/memsqs"
)

type pollKey struct{}

// TestWithWake: a long poll calls woke with its request's context each time
// it wakes, before it looks at the queue again (a send, its wait running
// out, its caller giving up); once its caller gave up it goes on as an
// abandoned poll, which wakes nothing more (abandoned_test.go).
func TestWithWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var woke []string
		s := memsqs.New(memsqs.WithWake(func(ctx context.Context) {
			mu.Lock()
			defer mu.Unlock()
			name, _ := ctx.Value(pollKey{}).(string)
			woke = append(woke, name)
		}))
		bg := context.Background()
		q, err := s.CreateQueue(bg, &sqs.CreateQueueInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan int, 1)
		go func() {
			out, err := s.ReceiveMessage(context.WithValue(bg, pollKey{}, "a"), &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
			if err != nil {
				t.Error(err)
			}
			got <- len(out.Messages)
		}()
		time.Sleep(time.Second)
		if _, err := s.SendMessage(bg, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
		if n := <-got; n != 1 {
			t.Fatalf("the poll got %d messages", n)
		}
		// A poll whose caller gives up wakes once, then goes on without
		// a wake.
		ctx, cancel := context.WithCancel(context.WithValue(bg, pollKey{}, "b"))
		go func() { time.Sleep(time.Second); cancel() }()
		if _, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20}); err == nil {
			t.Fatal("a cancelled poll answered")
		}
		time.Sleep(30 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(woke, []string{"a", "b"}) {
			t.Fatalf("woke for %q, want the send's wake of a and the cancel's of b", woke)
		}
	})
}

// TestWakeComesBeforeTheContext: a send and a cancel at one instant reach a
// waiting poll in the runtime's order; woke runs before the poll looks at
// its context, so a hook that waits (a simulation's step) lets both land
// and the poll always sees the cancel, however the two were ordered.
func TestWakeComesBeforeTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memsqs.New(memsqs.WithWake(func(context.Context) { time.Sleep(time.Nanosecond) }))
		bg := context.Background()
		for i := range 200 {
			q, err := s.CreateQueue(bg, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprint("q", i))}) // empty
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(bg)
			done := make(chan error, 1)
			go func() {
				_, err := s.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
				done <- err
			}()
			synctest.Wait() // it waits
			if _, err := s.SendMessage(bg, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatalf("poll %d answered although its caller gave up at the instant of the send", i)
			}
		}
	})
}
