package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/console"
	"github.com/exactlyonce/exactly/internal/console/consoletest"
)

// TestRates: the overview draws the workers' counters as rates per second
// over the samples, summed over endpoints and labels, as inline SVG; a
// worker that restarts (its counters fall) counts 0, not a negative rate;
// an endpoint that cannot be read is named.
func TestRates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	received := 0.0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "# HELP exactly_messages_received_total x\n# TYPE exactly_messages_received_total counter\n")
		fmt.Fprintf(w, "exactly_messages_received_total{queue=\"a.fifo\"} %g\nexactly_messages_received_total{queue=\"b.fifo\"} %g\n", received, received)
		fmt.Fprintf(w, "exactly_duplicates_total{queue=\"a.fifo\"} 3\nexactly_messages_in_flight 7\n")
	}))
	defer srv.Close()
	w, err := consoletest.New(context.Background(), time.Now())
	require.NoError(t, err)
	cfg := w.Config(false)
	now := time.Now()
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg.Metrics = []string{srv.URL + "/metrics", "http://127.0.0.1:1/metrics"}
	c, err := console.New(cfg)
	require.NoError(t, err)
	step := func(add float64) {
		mu.Lock()
		received += add
		now = now.Add(5 * time.Second)
		mu.Unlock()
		c.Sample(context.Background())
	}
	step(0)
	_, body := get(t, c, "/")
	require.Contains(t, body, `aria-label="not enough samples yet"`)
	step(10) // 2 endpoints' labels x 10 in 5 s: 4/s
	step(5)  // 2/s
	_, body = get(t, c, "/")
	require.Contains(t, body, `id="rates"`)
	row := body[strings.Index(body, "<td>received</td>"):]
	row = row[:strings.Index(row, "</tr>")]
	require.Contains(t, row, ">2.0/s<", "the last interval's rate")
	require.Contains(t, row, `aria-label="peak 4.0/s"`)
	require.Contains(t, row, "<polyline points=")
	dup := body[strings.Index(body, "<td>duplicates</td>"):]
	require.Contains(t, dup[:strings.Index(dup, "</tr>")], ">0.0/s<", "a flat counter")
	require.Contains(t, body, "127.0.0.1:1", "the endpoint it cannot read")

	mu.Lock()
	received = 0 // a restart
	mu.Unlock()
	step(0)
	_, body = get(t, c, "/")
	row = body[strings.Index(body, "<td>received</td>"):]
	require.Contains(t, row[:strings.Index(row, "</tr>")], ">0.0/s<")
}
