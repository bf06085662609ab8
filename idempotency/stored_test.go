package idempotency

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStoredResponseRoundTrip: a response comes back from its stored form
// as it was, and the JSON form of earlier versions is still read.
func TestStoredResponseRoundTrip(t *testing.T) {
	t.Parallel()
	r := &recorder{header: http.Header{"Location": {"/orders/1"}, "Set-Cookie": {"a=1", "b=2"}, "X-Empty": {}}, limit: MaxResultBytes}
	r.WriteHeader(http.StatusCreated)
	_, _ = r.Write([]byte{0, 1, 2, 255})
	b, ok := r.encode()
	require.True(t, ok)
	sr, err := decodeResponse(b)
	require.NoError(t, err)
	require.Equal(t, storedResponse{status: http.StatusCreated, header: r.header, body: []byte{0, 1, 2, 255}}, sr)

	sr, err = decodeResponse([]byte(`{"s":201,"h":{"Location":["/orders/1"]},"b":"AAEC/w=="}`))
	require.NoError(t, err)
	require.Equal(t, storedResponse{status: http.StatusCreated, header: http.Header{"Location": {"/orders/1"}}, body: []byte{0, 1, 2, 255}}, sr)
}

// FuzzDecodeResponse: no stored bytes make the replay panic.
func FuzzDecodeResponse(f *testing.F) {
	r := &recorder{header: http.Header{"Location": {"/orders/1"}}, limit: MaxResultBytes}
	_, _ = r.Write([]byte("ok"))
	b, _ := r.encode()
	f.Add(b)
	f.Add([]byte{storedFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte(`{"s":200}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeResponse(b)
	})
}
