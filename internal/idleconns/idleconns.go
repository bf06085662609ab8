// Package idleconns closes, when a harness is done, the keep-alive
// connections of the AWS clients it made: each holds two goroutines
// (net/http's readLoop and writeLoop) until the transport's idle timeout,
// which outlive the run that made them. The harnesses' tests check that
// none are left (goleak).
package idleconns

import (
	"context"
	"net"
	"net/http"
	"sync"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Set is the open connections a harness's clients dialled.
type Set struct {
	mu    sync.Mutex
	conns map[*conn]struct{}
}

// conn is a connection that leaves its Set when closed, so that a long run
// that dials again and again holds only the open ones.
type conn struct {
	net.Conn
	s *Set
}

func (c *conn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// Client is the SDK's default HTTP client, opts applied to its transport,
// whose connections s records. (The SDK clones the transport it is given:
// the connections are tracked through the dialler, which the clone keeps.)
func (s *Set) Client(opts ...func(*http.Transport)) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(append(opts, s.track)...)
}

func (s *Set) track(tr *http.Transport) {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &conn{Conn: c, s: s}
		s.mu.Lock()
		if s.conns == nil {
			s.conns = map[*conn]struct{}{}
		}
		s.conns[tc] = struct{}{}
		s.mu.Unlock()
		return tc, nil
	}
}

// Close closes every connection the clients dialled: call it when nothing
// uses them any more (a client used after dials again).
func (s *Set) Close() {
	s.mu.Lock()
	open := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close() // closed already when the server hung up
	}
}
