package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	// Err500 answers with HTTP 500 and the service's internal-error body
	// (DynamoDB InternalServerError, SQS InternalFailure) without
	// forwarding: nothing took effect. The SDK retries it.
	Err500
	// Err503 answers with HTTP 503 ServiceUnavailable without forwarding.
	Err503
	// Throttle answers with HTTP 400 and the service's throttling error
	// (DynamoDB ProvisionedThroughputExceededException or
	// ThrottlingException, in turn; SQS RequestThrottled) without
	// forwarding. The SDK retries it with backoff.
	Throttle
	// Slow forwards the request and returns its response only after the
	// proxy's slow delay (SetSlow): a call slow past a lease or a
	// visibility timeout. Off unless FaultRates.SlowPct is set.
	Slow
	// TxConflict answers a TransactWriteItems with HTTP 400
	// TransactionCanceledException whose first cancellation reason is
	// TransactionConflict, without forwarding. The SDK does not retry it:
	// the worker must.
	TxConflict
)

// Faults lists every fault, in the report's order.
var Faults = []Fault{Pass, Reset, LostAck, Slow, Err500, Err503, Throttle, TxConflict}

func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case Reset:
		return "reset"
	case LostAck:
		return "lost-ack"
	case Slow:
		return "slow"
	case Err500:
		return "500"
	case Err503:
		return "503"
	case Throttle:
		return "throttle"
	case TxConflict:
		return "tx-conflict"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Answered reports whether the proxy answers the request itself with an
// error response (it is never forwarded).
func (f Fault) Answered() bool {
	switch f {
	case Err500, Err503, Throttle, TxConflict:
		return true
	}
	return false
}

// Decider picks the fault for one request, by operation (the part of the
// X-Amz-Target header after the dot, "ReceiveMessage", "PutItem").
type Decider func(op string) Fault

// RandomFaults returns a Decider that resets resetPct percent of requests and
// loses the response of dropPct percent, drawn from a seeded generator.
func RandomFaults(seed uint64, resetPct, dropPct float64) Decider {
	return MixedFaults(seed, FaultRates{ResetPct: resetPct, DropPct: dropPct})
}

// FaultRates are the percentages of requests that start each fault.
type FaultRates struct {
	ResetPct float64 // Reset
	DropPct  float64 // LostAck
	Err5xPct float64 // Err500 or Err503, half each
	ThrotPct float64 // Throttle
	// TxPct is the percentage of TransactWriteItems requests that start a
	// TxConflict.
	TxPct float64
	// SlowPct is the percentage of requests answered late (Slow).
	SlowPct float64
	// Burst: an error response (Err500, Err503, Throttle, TxConflict) that
	// starts also answers the next 0..Burst-1 requests of that proxy (for
	// TxConflict: its next TransactWriteItems), drawn uniformly: a burst of
	// Burst or more outlasts the SDK's three attempts. 0 or 1: no bursts.
	Burst int
}

// MixedFaults returns a Decider that draws each request's fault from a
// seeded generator at the given rates, with error responses in short bursts.
func MixedFaults(seed uint64, r FaultRates) Decider {
	var (
		mu    sync.Mutex
		burst Fault // the error response of the burst under way
		left  int   // requests it still answers
		txTo  int   // TransactWriteItems a TxConflict burst still answers
	)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	start := func() int {
		if r.Burst <= 1 {
			return 0
		}
		return rng.IntN(r.Burst)
	}
	return func(op string) Fault {
		mu.Lock()
		defer mu.Unlock()
		x := rng.Float64() * 100 // drawn for every request: the sequence stays the seed's
		tx := op == "TransactWriteItems"
		switch {
		case tx && txTo > 0:
			txTo--
			return TxConflict
		case left > 0:
			left--
			return burst
		}
		switch {
		case x < r.ResetPct:
			return Reset
		case x < r.ResetPct+r.DropPct:
			return LostAck
		case x < r.ResetPct+r.DropPct+r.Err5xPct:
			burst, left = Err500, start()
			if rng.IntN(2) == 1 {
				burst = Err503
			}
			return burst
		case x < r.ResetPct+r.DropPct+r.Err5xPct+r.ThrotPct:
			burst, left = Throttle, start()
			return burst
		case x < r.ResetPct+r.DropPct+r.Err5xPct+r.ThrotPct+r.SlowPct:
			return Slow
		}
		if tx && rng.Float64()*100 < r.TxPct {
			txTo = start()
			return TxConflict
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
	// Sent is when the request was forwarded to the upstream; zero when it
	// was not (Reset, an error response).
	Sent time.Time
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
	calm   bool          // error responses are turned off (Calm)
	slow   time.Duration // how long a Slow fault holds a response
	nth    int64         // error responses so far, to alternate the throttling errors
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

// Calm turns the error responses (Err500, Err503, Throttle, TxConflict) off
// (on) or back on: such a request is forwarded as Pass instead. Resets and
// lost responses go on. The harness calms a worker's proxies while the
// worker shuts down gracefully, so that the SDK's backoff after a burst
// does not eat the shutdown check's margin.
func (p *Proxy) Calm(on bool) {
	p.mu.Lock()
	p.calm = on
	p.mu.Unlock()
}

// SetSlow sets how long a Slow fault holds a response (0: it does not).
func (p *Proxy) SetSlow(d time.Duration) {
	p.mu.Lock()
	p.slow = d
	p.mu.Unlock()
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
		p.mu.Lock()
		if (fault.Answered() || fault == Slow) && p.calm {
			fault = Pass
		}
		slow := p.slow
		if fault == TxConflict && op != "TransactWriteItems" {
			fault = Pass // a Decider's mistake: no other operation has cancellation reasons
		}
		nth := p.nth
		if fault.Answered() {
			p.nth++
		}
		p.mu.Unlock()
		p.count(op, fault)
		if fault.Answered() {
			status, hdr, rbody := errorResponse(p.name, fault, body, nth)
			p.notify(Exchange{Op: op, Fault: fault, Request: body, Response: rbody, Status: status, Held: held})
			resp := &http.Response{
				StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: hdr, Request: req,
				Body: io.NopCloser(bytes.NewReader(rbody)), ContentLength: int64(len(rbody)),
			}
			if err := resp.Write(client); err != nil || req.Close {
				return
			}
			continue
		}
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
		sent := time.Now()
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
		if fault == Slow && slow > 0 {
			t := time.NewTimer(slow)
			select {
			case <-t.C:
			case <-p.done:
				t.Stop()
				return
			}
		}
		open, heldResp := p.hold()
		if !open {
			return
		}
		p.notify(Exchange{Op: op, Fault: fault, Request: body, Response: rbody, Status: resp.StatusCode, Held: held || heldResp, Sent: sent})
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

// errorResponse is the answer of an error fault: status, headers and the
// AWS JSON 1.0 error body the service sends (service "sqs" or "dynamodb";
// anything else is answered like DynamoDB). nth alternates DynamoDB's two
// throttling errors.
func errorResponse(service string, f Fault, reqBody []byte, nth int64) (int, http.Header, []byte) {
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", fmt.Sprintf("chaos-%s-%d", f, nth))
	status, typ, msg := 500, "", ""
	if service == "sqs" {
		code, fault := "", "Receiver"
		switch f {
		case Err500:
			code, msg = "InternalFailure", "The request processing has failed because of an unknown error, exception or failure."
		case Err503:
			status, code, msg = 503, "ServiceUnavailable", "The request has failed due to a temporary failure of the server."
		default: // Throttle
			status, code, fault, msg = 400, "RequestThrottled", "Sender", "The request was denied due to request throttling."
		}
		typ = "com.amazonaws.sqs#" + code
		h.Set("X-Amzn-Query-Error", code+";"+fault)
		b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
		return status, h, b
	}
	const ns = "com.amazonaws.dynamodb.v20120810#"
	switch f {
	case Err500:
		typ, msg = "InternalServerError", "Internal server error"
	case Err503:
		status, typ, msg = 503, "ServiceUnavailable", "The service is currently unavailable or busy."
	case Throttle:
		status = 400
		if nth%2 == 0 {
			typ, msg = "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
		} else {
			typ, msg = "ThrottlingException", "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly."
		}
	case TxConflict:
		// One cancellation reason per item, the first a TransactionConflict
		// (the dedup record, where the worker's conflicts are).
		var in struct {
			TransactItems []json.RawMessage `json:"TransactItems"`
		}
		_ = json.Unmarshal(reqBody, &in)
		type reason struct {
			Code    string `json:"Code"`
			Message string `json:"Message,omitempty"`
		}
		reasons := []reason{{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}}
		codes := []string{"TransactionConflict"}
		for range max(len(in.TransactItems)-1, 0) {
			reasons = append(reasons, reason{Code: "None"})
			codes = append(codes, "None")
		}
		b, _ := json.Marshal(map[string]any{
			"__type":              ns + "TransactionCanceledException",
			"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
			"CancellationReasons": reasons,
		})
		return 400, h, b
	}
	b, _ := json.Marshal(map[string]string{"__type": ns + typ, "message": msg})
	return status, h, b
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
