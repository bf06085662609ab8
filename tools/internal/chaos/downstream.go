package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// HTTPEffect is the worker's built-in http effect, run in claim mode: the
// chaos harness points it at a Downstream that counts every call.
const HTTPEffect = "http"

// LedgerEffect names the ledger's run in Config.Effects: the workers run
// EffectName, optimistic on odd slots and transactional on even ones.
const LedgerEffect = "ledger"

// Call is one request the downstream received.
type Call struct {
	N      int       // arrival order, from 1
	At     time.Time // arrival
	Worker string    // worker slot ("w1"), from the URL path
	Key    string    // raw dedup key (the Idempotency-Key header's last part)
	Group  string    // X-Message-Group-Id
	Seq    int64     // the body's seq
	Status int       // what the downstream answered
}

// Downstream is the counting HTTP server of claim mode: it records every
// call by idempotency key and answers 200, after the body's sleep_ms (so
// that a sleeper's effect outlasts the visibility timeout unless heartbeats
// keep it), or 400 to a body whose amount_cents is not a number (a poison
// message: a permanent failure, to the DLQ). It does not honour the
// idempotency key itself: every call counts, so that the harness sees each
// one the worker makes.
type Downstream struct {
	srv *http.Server
	ln  net.Listener

	mu    sync.Mutex
	calls []Call
}

// NewDownstream listens on a loopback port.
func NewDownstream() (*Downstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen for the downstream: %w", err)
	}
	d := &Downstream{ln: ln}
	d.srv = &http.Server{Handler: http.HandlerFunc(d.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// URL is the URL of slot worker's calls: http://127.0.0.1:port/<worker>.
func (d *Downstream) URL(worker string) string {
	return "http://" + d.ln.Addr().String() + "/" + worker
}

// Close stops the server.
func (d *Downstream) Close() error { return d.srv.Close() }

// Calls returns the calls so far, in arrival order.
func (d *Downstream) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

func (d *Downstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var b struct {
		AmountCents json.RawMessage `json:"amount_cents"`
		Seq         int64           `json:"seq"`
		SleepMS     int64           `json:"sleep_ms"`
	}
	_ = json.Unmarshal(body, &b)
	var amount int64
	status := http.StatusOK
	if json.Unmarshal(b.AmountCents, &amount) != nil {
		status = http.StatusBadRequest
	}
	c := Call{At: time.Now(), Worker: strings.Trim(r.URL.Path, "/"), Key: rawKey(r.Header.Get("Idempotency-Key")),
		Group: r.Header.Get("X-Message-Group-Id"), Seq: b.Seq, Status: status}
	d.mu.Lock()
	c.N = len(d.calls) + 1
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	if status == http.StatusOK && b.SleepMS > 0 {
		t := time.NewTimer(time.Duration(b.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusOK {
		fmt.Fprintf(w, `{"call":%d}`, c.N)
	} else {
		fmt.Fprint(w, `{"error":"amount_cents is not a number"}`)
	}
}
