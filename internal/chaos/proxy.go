package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

const (
	// Pass forwards the request and returns the response.
	Pass Fault = iota
	// Reset resets the client's connection before anything is forwarded:
	// the request never reaches the emulator.
	Reset
	// LostAck forwards the request, reads the whole response, then resets
	// the client's connection instead of returning it: the request took
	// effect but the client cannot know (the lost acknowledgement).
	LostAck
)

func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case Reset:
		return "reset"
	case LostAck:
		return "lost-ack"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Decider picks the fault for one request, by operation (the part of the
// X-Amz-Target header after the dot, "ReceiveMessage", "PutItem").
type Decider func(op string) Fault

// RandomFaults returns a Decider that resets resetPct percent of requests and
// loses the response of dropPct percent, drawn from a seeded generator.
func RandomFaults(seed uint64, resetPct, dropPct float64) Decider {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	return func(string) Fault {
		mu.Lock()
		x := rng.Float64() * 100
		mu.Unlock()
		switch {
		case x < resetPct:
			return Reset
		case x < resetPct+dropPct:
			return LostAck
		}
		return Pass
	}
}

// maxBody bounds the request and response bodies the proxy buffers. The
// worker's largest responses (ReceiveMessage of 10 messages) are far below.
const maxBody = 16 << 20

// Exchange is one request the proxy handled, for an observer.
type Exchange struct {
	Op       string
	Fault    Fault
	Request  []byte // body
	Response []byte // body; nil for Reset
	Status   int    // 0 for Reset
	Held     bool   // a partition held the request or its response
}

// Proxy is a TCP proxy for one HTTP/1.1 upstream on a loopback port. It
// parses request and response boundaries (keep-alive connections carry many
// requests) so that it can fault single requests. Each client connection gets
// its own upstream connection.
type Proxy struct {
	name     string
	upstream string
	decide   Decider
	observe  func(Exchange)
	ln       net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	stats  map[statKey]int64
	healed chan struct{} // non-nil while partitioned; closed by Heal
	held   int64         // requests a partition held
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
}

type statKey struct {
	op    string
	fault Fault
}

// NewProxy listens on 127.0.0.1 (a random port) and forwards to upstream
// (host:port). name labels its statistics; decide (nil: no faults) picks each
// request's fault; observe, when set, is called after each request, from the
// connection's goroutine.
func NewProxy(name, upstream string, decide Decider, observe func(Exchange)) (*Proxy, error) {
	if decide == nil {
		decide = func(string) Fault { return Pass }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the %s proxy: %w", name, err)
	}
	p := &Proxy{
		name: name, upstream: upstream, decide: decide, observe: observe, ln: ln,
		conns: map[net.Conn]struct{}{}, stats: map[statKey]int64{}, done: make(chan struct{}),
	}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's listening address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's http:// URL, for AWS_ENDPOINT_URL_*.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Close stops listening, closes every connection and waits for the
// connection handlers to return.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() {
			defer p.untrack(c)
			p.serve(c)
		})
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Partition cuts the clients off: until Heal, requests are held before they
// are forwarded and responses before they are returned, with every
// connection left open, as in a network partition. The held traffic goes
// through when it heals, in whatever order the connections resume.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
}

// Held returns the number of requests and responses a partition held.
func (p *Proxy) Held() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// hold waits while the proxy is partitioned; it reports whether the proxy
// is still open, and whether it waited.
func (p *Proxy) hold() (open, waited bool) {
	p.mu.Lock()
	ch := p.healed
	if ch != nil {
		p.held++
	}
	p.mu.Unlock()
	if ch == nil {
		return true, false
	}
	select {
	case <-ch:
		return true, true
	case <-p.done:
		return false, true
	}
}

func (p *Proxy) count(op string, f Fault) {
	p.mu.Lock()
	p.stats[statKey{op, f}]++
	p.mu.Unlock()
}

// serve carries the requests of one client connection until either side
// closes it or a fault resets it.
func (p *Proxy) serve(client net.Conn) {
	var (
		up   net.Conn
		upBr *bufio.Reader
	)
	defer func() {
		if up != nil {
			p.untrack(up)
		}
	}()
	br := bufio.NewReader(client)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return // client closed, or not HTTP: nothing to forward
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
		req.Body.Close()
		if err != nil || len(body) > maxBody {
			return
		}
		op := operation(req.Header.Get("X-Amz-Target"))
		open, held := p.hold()
		if !open {
			return
		}
		fault := p.decide(op)
		p.count(op, fault)
		if fault == Reset {
			resetConn(client)
			p.notify(Exchange{Op: op, Fault: fault, Request: body, Held: held})
			return
		}
		if up == nil {
			c, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil || !p.track(c) {
				if c != nil {
					c.Close()
				}
				resetConn(client) // the client sees a connection error and retries
				return
			}
			up, upBr = c, bufio.NewReader(c)
		}
		req.Body, req.ContentLength, req.TransferEncoding = nil, 0, nil
		if len(body) > 0 {
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		if err := req.Write(up); err != nil {
			resetConn(client)
			return
		}
		resp, err := http.ReadResponse(upBr, req)
		if err != nil {
			resetConn(client)
			return
		}
		rbody, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		resp.Body.Close()
		if err != nil || len(rbody) > maxBody {
			resetConn(client)
			return
		}
		open, heldResp := p.hold()
		if !open {
			return
		}
		p.notify(Exchange{Op: op, Fault: fault, Request: body, Response: rbody, Status: resp.StatusCode, Held: held || heldResp})
		if fault == LostAck {
			resetConn(client)
			return
		}
		resp.Body = io.NopCloser(bytes.NewReader(rbody))
		resp.ContentLength = int64(len(rbody))
		resp.TransferEncoding = nil
		resp.Header.Del("Transfer-Encoding")
		if err := resp.Write(client); err != nil {
			return
		}
		if resp.Close || req.Close {
			return
		}
	}
}

func (p *Proxy) notify(e Exchange) {
	if p.observe != nil {
		p.observe(e)
	}
}

// resetConn closes c with a TCP RST (SO_LINGER 0), which clients report as
// "connection reset by peer".
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// operation turns "AmazonSQS.ReceiveMessage" or
// "DynamoDB_20120810.PutItem" into the operation's name.
func operation(target string) string {
	if target == "" {
		return "other"
	}
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// FaultCount is how often a fault hit one operation.
type FaultCount struct {
	Proxy string
	Op    string
	Fault Fault
	N     int64
}

// Stats returns the counts so far, sorted by fault, then operation.
func (p *Proxy) Stats() []FaultCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]FaultCount, 0, len(p.stats))
	for k, n := range p.stats {
		out = append(out, FaultCount{Proxy: p.name, Op: k.op, Fault: k.fault, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Fault != out[j].Fault {
			return out[i].Fault < out[j].Fault
		}
		return out[i].Op < out[j].Op
	})
	return out
}

// Totals returns the number of requests seen and of each fault.
func (p *Proxy) Totals() (requests int64, byFault map[Fault]int64) {
	byFault = map[Fault]int64{}
	for _, c := range p.Stats() {
		requests += c.N
		byFault[c.Fault] += c.N
	}
	return requests, byFault
}
