package dedup_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
)

func TestPayloadSources(t *testing.T) {
	t.Parallel()
	body, err := dedup.ParsePayloadSource("body")
	require.NoError(t, err)
	h, err := body.Hash(`{"a":1}`)
	require.NoError(t, err)
	require.Equal(t, dedup.PayloadHash(`{"a":1}`), h, "body hashes are what records have always held")

	js, err := dedup.ParsePayloadSource("json:/account,/amount")
	require.NoError(t, err)
	require.Equal(t, "json:/account,/amount", js.String())
	h1, err := js.Hash(`{"account":"a1","amount":250,"sent_at":"10:00"}`)
	require.NoError(t, err)
	h2, err := js.Hash(` {"sent_at":"10:05", "amount":250 , "account":"a1"}`)
	require.NoError(t, err)
	require.Equal(t, h1, h2, "re-serialised, reordered, a field added: the same payload")
	h3, err := js.Hash(`{"account":"a1","amount":251}`)
	require.NoError(t, err)
	require.NotEqual(t, h1, h3)
	_, err = js.Hash(`not json`)
	require.True(t, effect.IsPermanent(err), "a body that is not JSON is permanent: %v", err)

	other, err := dedup.ParsePayloadSource("json:/account")
	require.NoError(t, err)
	h4, err := other.Hash(`{"account":"a1","amount":250}`)
	require.NoError(t, err)
	require.False(t, dedup.Comparable(h1, h4), "other pointers, other kind")
	require.False(t, dedup.Comparable(h, h1), "body and json never compared")
	require.True(t, dedup.Comparable(h1, h3))
	none, err := dedup.ParsePayloadSource("none")
	require.NoError(t, err)
	hn, err := none.Hash("x")
	require.NoError(t, err)
	require.False(t, dedup.Comparable(hn, hn))

	for _, bad := range []string{"json:", "json:a", "sha", "json:/a,b"} {
		_, err := dedup.ParsePayloadSource(bad)
		require.Error(t, err, bad)
	}
}
