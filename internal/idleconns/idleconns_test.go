package idleconns

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestCloseEndsKeepAlives: requests leave a connection open for the next
// (goroutines of its own, until the idle timeout); Close ends it and them,
// while the server still runs.
func TestCloseEndsKeepAlives(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	before := goleak.IgnoreCurrent()
	var s Set
	c := s.Client()
	for range 3 {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	s.mu.Lock()
	require.Len(t, s.conns, 1, "one kept-alive connection, reused")
	s.mu.Unlock()
	require.Error(t, goleak.Find(before), "the connection's goroutines run")
	s.Close()
	require.NoError(t, goleak.Find(before))
	require.Empty(t, s.conns)
}
