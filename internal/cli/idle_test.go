package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerRunKeepsAConnectionPerConcurrentCall: `worker run`'s AWS
// clients keep as many idle connections per endpoint as the worker makes
// calls at once (its handlers' commits, its receivers' long polls), so
// that rounds of concurrent calls reuse them. The SDK's transport keeps
// 10: past that, each round closed the rest and dialled them again (on
// AWS, a TLS handshake each).
func TestWorkerRunKeepsAConnectionPerConcurrentCall(t *testing.T) {
	s := &settings{concurrency: 32, queues: []string{"q"}}
	if got, want := s.awsCalls(), 32+4; got != want { // ReceiversFor(32, false) = 4
		t.Fatalf("awsCalls = %d, want %d", got, want)
	}
	// With group commit a handler gives its slot back while its commit
	// waits, and the receivers are one per 4 handlers.
	if got, want := (&settings{concurrency: 32, queues: []string{"q"}, groupCommit: 5 * time.Millisecond}).awsCalls(), 64+8; got != want {
		t.Fatalf("awsCalls with group commit = %d, want %d", got, want)
	}
	t.Setenv("AWS_REGION", "us-east-1")
	dials := func(tune ...func(*http.Transport)) int64 {
		var opened atomic.Int64
		release := make(chan struct{})
		var waiting sync.WaitGroup
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			waiting.Done()
			<-release // every call of the round is under way at once
		}))
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		cl, err := newClients(context.Background(), nil, nil, tune...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.close()
		const calls = 36
		for range 3 {
			waiting.Add(calls)
			release = make(chan struct{})
			var done sync.WaitGroup
			for range calls {
				done.Go(func() {
					req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
					resp, err := cl.cfg.HTTPClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_ = resp.Body.Close()
				})
			}
			waiting.Wait()
			close(release)
			done.Wait()
		}
		return opened.Load()
	}
	n := dials()
	t.Logf("the SDK's own transport: %d dials", n)
	if n <= 36 {
		t.Fatalf("the SDK's own transport dialled %d times for 3 rounds of 36 calls: the test cannot tell", n)
	}
	if n := dials(keepIdle(s.awsCalls())); n != 36 {
		t.Fatalf("dialled %d times for 3 rounds of 36 calls, want 36 (one per call under way)", n)
	}
}
