package chaos

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// upstream is a loopback HTTP server that counts requests by operation and
// by client connection, and answers with the request's body reversed.
type upstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	ops   map[string]int
	peers map[string]bool
	block chan struct{} // operation "Block" waits on it
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{ops: map[string]int{}, peers: map[string]bool{}, block: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		op := operation(r.Header.Get("X-Amz-Target"))
		u.mu.Lock()
		u.ops[op]++
		u.peers[r.RemoteAddr] = true
		u.mu.Unlock()
		switch op {
		case "Block":
			select {
			case <-u.block:
			case <-r.Context().Done():
			}
		case "Chunked":
			// No Content-Length: the response is chunked.
			for i := range 50 {
				fmt.Fprintf(w, "chunk %d;", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("X-Amz-Crc32", "1")
		w.Write([]byte(reverse(string(b))))
	}))
	t.Cleanup(func() { close(u.block); u.srv.Close() })
	return u
}

func (u *upstream) count(op string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ops[op]
}

func (u *upstream) connections() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.peers)
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func setupProxy(t *testing.T, decide Decider) (*Proxy, *upstream, *http.Client) {
	t.Helper()
	return setupObservedProxy(t, decide, nil)
}

func setupObservedProxy(t *testing.T, decide Decider, observe func(Exchange)) (*Proxy, *upstream, *http.Client) {
	t.Helper()
	u := newUpstream(t)
	p, err := NewProxy("test", strings.TrimPrefix(u.srv.URL, "http://"), decide, observe)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	require.True(t, strings.HasPrefix(p.Addr(), "127.0.0.1:"), p.Addr())
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return p, u, &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func call(c *http.Client, url, op, body string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Amz-Target", "Service_2012."+op)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

func TestProxyPassesRequestsOnKeepAliveConnections(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, nil)
	for i := range 20 {
		got, err := call(c, p.URL(), "Echo", fmt.Sprintf("hello %d", i))
		require.NoError(t, err)
		require.Equal(t, reverse(fmt.Sprintf("hello %d", i)), got)
	}
	require.Equal(t, 20, u.count("Echo"))
	require.Equal(t, 1, u.connections(), "one client connection, one upstream connection, 20 requests")
	n, byFault := p.Totals()
	require.EqualValues(t, 20, n)
	require.EqualValues(t, 20, byFault[Pass])

	// A chunked response is re-framed intact; an empty body passes too.
	got, err := call(c, p.URL(), "Chunked", "")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got, "chunk 0;chunk 1;"), got)
	require.True(t, strings.HasSuffix(got, "chunk 49;"), got)
	got, err = call(c, p.URL(), "Echo", "")
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestProxyResetNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, func(op string) Fault {
		if op == "Boom" {
			return Reset
		}
		return Pass
	})
	_, err := call(c, p.URL(), "Echo", "warm") // a keep-alive connection first
	require.NoError(t, err)
	_, err = call(c, p.URL(), "Boom", "x")
	require.Error(t, err)
	require.Regexp(t, "connection reset|EOF", err.Error())
	require.Zero(t, u.count("Boom"), "a reset request must not reach the upstream")
	// The client recovers on a new connection.
	got, err := call(c, p.URL(), "Echo", "after")
	require.NoError(t, err)
	require.Equal(t, "retfa", got)
	require.Equal(t, []FaultCount{
		{Proxy: "test", Op: "Echo", Fault: Pass, N: 2},
		{Proxy: "test", Op: "Boom", Fault: Reset, N: 1},
	}, p.Stats())
}

func TestProxyLostAckReachesUpstreamButNotTheClient(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []Exchange
	p, u, c := setupObservedProxy(t, func(op string) Fault {
		if op == "Put" {
			return LostAck
		}
		return Pass
	}, func(e Exchange) {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	})
	for range 3 {
		_, err := call(c, p.URL(), "Put", "item")
		require.Error(t, err, "the response of a lost ack must not reach the client")
		require.Regexp(t, "connection reset|EOF", err.Error())
	}
	require.Equal(t, 3, u.count("Put"), "a lost-ack request took effect upstream")
	_, byFault := p.Totals()
	require.EqualValues(t, 3, byFault[LostAck])
	got, err := call(c, p.URL(), "Echo", "ok")
	require.NoError(t, err)
	require.Equal(t, "ko", got)
	// The observer sees the lost responses too.
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 4)
	for i := range seen {
		require.False(t, seen[i].Sent.IsZero(), "forwarded")
		seen[i].Sent = time.Time{}
	}
	require.Equal(t, Exchange{Op: "Put", Fault: LostAck, Request: []byte("item"), Response: []byte("meti"), Status: 200}, seen[0])
	require.Equal(t, Exchange{Op: "Echo", Fault: Pass, Request: []byte("ok"), Response: []byte("ko"), Status: 200}, seen[3])
}

func TestProxyCloseEndsLongRequests(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, nil)
	errc := make(chan error, 1)
	go func() { _, err := call(c, p.URL(), "Block", ""); errc <- err }()
	require.Eventually(t, func() bool { return u.count("Block") == 1 }, 5*time.Second, 5*time.Millisecond)
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a request was in flight")
	}
	require.Error(t, <-errc)
	_, err := call(c, p.URL(), "Echo", "x")
	require.Error(t, err, "a closed proxy accepts nothing")
}

func TestProxyConcurrentClientsUnderRandomFaults(t *testing.T) {
	t.Parallel()
	p, u, c := setupProxy(t, RandomFaults(7, 10, 10))
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				body := fmt.Sprintf("w%d-%d", w, i)
				got, err := call(c, p.URL(), "Echo", body)
				if err != nil {
					failed.Add(1)
					continue
				}
				if got != reverse(body) {
					t.Errorf("got %q for %q: responses crossed", got, body)
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	n, byFault := p.Totals()
	require.EqualValues(t, 400, n)
	require.Equal(t, byFault[Pass], ok.Load())
	require.Equal(t, byFault[Reset]+byFault[LostAck], failed.Load())
	require.EqualValues(t, byFault[Pass]+byFault[LostAck], u.count("Echo"), "everything but resets reached the upstream")
	require.Positive(t, byFault[Reset])
	require.Positive(t, byFault[LostAck])
}

func TestRandomFaultsRates(t *testing.T) {
	t.Parallel()
	count := func(seed uint64) map[Fault]int {
		d := RandomFaults(seed, 3, 2)
		got := map[Fault]int{}
		for range 20000 {
			got[d("Op")]++
		}
		return got
	}
	got := count(1)
	require.InDelta(t, 600, got[Reset], 120)
	require.InDelta(t, 400, got[LostAck], 100)
	require.Equal(t, got, count(1), "the same seed gives the same faults")
	require.Equal(t, map[Fault]int{Pass: 1000}, func() map[Fault]int {
		d, m := RandomFaults(1, 0, 0), map[Fault]int{}
		for range 1000 {
			m[d("Op")]++
		}
		return m
	}())
}

func TestOperation(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ReceiveMessage", operation("AmazonSQS.ReceiveMessage"))
	require.Equal(t, "TransactWriteItems", operation("DynamoDB_20120810.TransactWriteItems"))
	require.Equal(t, "other", operation(""))
	require.Equal(t, "Plain", operation("Plain"))
}

func TestProxyPartitionHoldsRequestsAndResponses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []Exchange
	p, u, c := setupObservedProxy(t, nil, func(e Exchange) {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	})
	_, err := call(c, p.URL(), "Echo", "warm")
	require.NoError(t, err)

	// A request sent during the partition waits, unforwarded, until it heals.
	p.Partition()
	type result struct {
		got string
		err error
	}
	res := make(chan result, 1)
	go func() { got, err := call(c, p.URL(), "Echo", "late"); res <- result{got, err} }()
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, u.count("Echo")-1, "held: not forwarded")
	select {
	case r := <-res:
		t.Fatalf("returned during the partition: %+v", r)
	default:
	}
	p.Heal()
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, "etal", r.got)
	require.Equal(t, 2, u.count("Echo"))

	// A response that comes back during a partition waits too.
	go func() { got, err := call(c, p.URL(), "Block", ""); res <- result{got, err} }()
	require.Eventually(t, func() bool { return u.count("Block") == 1 }, 5*time.Second, 5*time.Millisecond)
	p.Partition()
	u.block <- struct{}{} // the upstream answers
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("response returned during the partition: %+v", r)
	default:
	}
	p.Heal()
	require.NoError(t, (<-res).err)
	require.EqualValues(t, 2, p.Held())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	require.False(t, seen[0].Held)
	require.True(t, seen[1].Held)
	require.True(t, seen[2].Held)

	// Close ends a partition's wait.
	p.Partition()
	go func() { _, err := call(c, p.URL(), "Echo", "never"); res <- result{"", err} }()
	time.Sleep(100 * time.Millisecond)
	p.Close()
	require.Error(t, (<-res).err)
}
