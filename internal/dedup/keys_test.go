package dedup_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/dedup"
)

func TestScopeKey(t *testing.T) {
	t.Parallel()
	queue := dedup.Scope{Namespace: "prod", Queue: "orders.fifo"}
	perGroup := dedup.Scope{Namespace: "prod", Queue: "orders.fifo", PerGroup: true}

	require.Equal(t, "prod#orders.fifo#k1", queue.Key("g1", "k1"), "queue scope: no group part")
	require.Equal(t, queue.Key("g1", "k1"), queue.Key("g2", "k1"), "queue scope: one key across groups")
	require.Equal(t, "prod#orders.fifo#g1#k1", perGroup.Key("g1", "k1"))
	require.NotEqual(t, perGroup.Key("g1", "k1"), perGroup.Key("g2", "k1"), "messageGroup scope: same key, two groups, two records")
	require.NotEqual(t, queue.Key("", "k1"), dedup.Scope{Namespace: "prod", Queue: "other"}.Key("", "k1"))
	require.NotEqual(t, queue.Key("", "k1"), dedup.Scope{Namespace: "test", Queue: "orders.fifo"}.Key("", "k1"))

	// Escaping: '#' and '%' anywhere cannot make two tuples meet.
	require.Equal(t, "prod#orders.fifo#a%23b#c%25d", perGroup.Key("a#b", "c%d"))
	require.NotEqual(t, perGroup.Key("a#b", "c"), perGroup.Key("a", "b#c"))
	require.NotEqual(t, perGroup.Key("a", "%23"), perGroup.Key("a", "#"))
	require.NotEqual(t, queue.Key("", "x#y"), dedup.Scope{Namespace: "prod", Queue: "orders.fifo#x"}.Key("", "y"))
	require.NotEqual(t, dedup.Scope{Namespace: "a#b", Queue: "q"}.Key("", "k"), dedup.Scope{Namespace: "a", Queue: "b#q"}.Key("", "k"))
}

// TestScopeKeyInjective: over many random tuples built from the characters
// that matter, no two distinct (namespace, queue, group, key) share a key.
func TestScopeKeyInjective(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "#", "%", "2", "3", "5", "H", "%H", "#%", "é"}
	word := func() string {
		var b strings.Builder
		for n := r.IntN(5); n > 0; n-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	type tuple struct{ ns, q, g, k string }
	seen := map[string]tuple{}
	for i := 0; i < 200_000; i++ {
		tu := tuple{word(), word(), word(), word()}
		key := dedup.Scope{Namespace: tu.ns, Queue: tu.q, PerGroup: true}.Key(tu.g, tu.k)
		if prev, ok := seen[key]; ok && prev != tu {
			t.Fatalf("%+v and %+v share the key %q", prev, tu, key)
		}
		seen[key] = tu
	}
}

func TestScopeKeyLong(t *testing.T) {
	t.Parallel()
	s := dedup.Scope{Namespace: "prod", Queue: "q", PerGroup: true}
	atLimit := strings.Repeat("k", dedup.MaxKeyPart)
	require.Equal(t, "prod#q#g#"+atLimit, s.Key("g", atLimit), "a key at the limit is kept as is")

	long := strings.Repeat("k", dedup.MaxKeyPart+1)
	got := s.Key("g", long)
	require.True(t, strings.HasPrefix(got, "prod#q#g#%H"), got)
	require.Len(t, got, len("prod#q#g#%H")+64, "hashed: %H and a hex SHA-256")
	require.NotEqual(t, got, s.Key("g", long+"x"), "long keys are hashed, not truncated: they stay distinct")
	require.NotEqual(t, s.Key("g", long[:dedup.MaxKeyPart]), got)
	require.Equal(t, got, s.Key("g", long), "deterministic")

	// Escaping counts: 200 '#' escape to 600 bytes and are hashed.
	hashes := strings.Repeat("#", 200)
	require.True(t, strings.HasPrefix(s.Key("g", hashes), "prod#q#g#%H"))
	// A literal "%H..." key escapes its '%': it cannot pose as a hash.
	fake := got[len("prod#q#g#"):]
	require.NotEqual(t, got, s.Key("g", fake))

	// Every part is bounded: the whole key fits DynamoDB's 2048 bytes.
	huge := dedup.Scope{Namespace: strings.Repeat("n", 5000), Queue: strings.Repeat("q", 5000), PerGroup: true}
	k := huge.Key(strings.Repeat("g", 5000), strings.Repeat("k", 5000))
	require.LessOrEqual(t, len(k), dedup.MaxKeyBytes)
	worst := dedup.Scope{Namespace: strings.Repeat("n", dedup.MaxKeyPart), Queue: strings.Repeat("q", dedup.MaxKeyPart), PerGroup: true}
	require.LessOrEqual(t, len(worst.Key(strings.Repeat("g", dedup.MaxKeyPart), strings.Repeat("k", dedup.MaxKeyPart))), dedup.MaxKeyBytes)

	// Invalid UTF-8 would be altered by the SDK in transit (to U+FFFD), making
	// distinct keys collide: such parts are hashed.
	a, b := s.Key("g", "x\xff"), s.Key("g", "x\xfe")
	require.True(t, utf8.ValidString(a))
	require.NotEqual(t, a, b)
}

func TestParseKeySource(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"": "auto", "auto": "auto", "body": "body", "attr:tenant-key": "attr:tenant-key",
		"json:/order/id": "json:/order/id", "json:/": "json:/",
	} {
		k, err := dedup.ParseKeySource(in)
		require.NoError(t, err, in)
		require.Equal(t, want, k.String(), in)
	}
	for _, in := range []string{"attr:", "json:", "json:order", "header:x", "Auto", "bodies"} {
		_, err := dedup.ParseKeySource(in)
		require.Error(t, err, in)
		require.ErrorContains(t, err, "auto, attr:NAME, json:/pointer or body", in)
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	msg := effect.Message{ID: "mid", DedupID: "did", Body: `{"order":{"id":"o-1","n":42,"f":1.50,"empty":"","null":null,"yes":true,"obj":{},"a/b":"slash","m~n":"tilde"},"list":["x","y"]}`,
		Attributes: map[string]string{"idempotency-key": "ik", "tenant": "t-9", "blank": ""}}
	ok := []struct{ source, want string }{
		{"auto", "ik"},
		{"attr:tenant", "t-9"},
		{"json:/order/id", "o-1"},
		{"json:/order/n", "42"},
		{"json:/order/f", "1.50"}, // numbers as written in the body
		{"json:/order/a~1b", "slash"},
		{"json:/order/m~0n", "tilde"},
		{"json:/list/1", "y"},
		{"body", dedup.PayloadHash(msg.Body)},
	}
	for _, c := range ok {
		k, err := dedup.ParseKeySource(c.source)
		require.NoError(t, err)
		got, err := k.Extract(msg)
		require.NoError(t, err, c.source)
		require.Equal(t, c.want, got, c.source)
	}

	auto, _ := dedup.ParseKeySource("auto")
	noAttr := msg
	noAttr.Attributes = nil
	got, err := auto.Extract(noAttr)
	require.NoError(t, err)
	require.Equal(t, "did", got, "auto: deduplication id after the attribute")
	noAttr.DedupID = ""
	got, err = auto.Extract(noAttr)
	require.NoError(t, err)
	require.Equal(t, "mid", got, "auto: message id last")
	_, err = auto.Extract(effect.Message{})
	require.True(t, effect.IsPermanent(err))

	bad := []struct{ source, body, msg string }{
		{"attr:missing", msg.Body, `no "missing" attribute`},
		{"attr:blank", msg.Body, `no "blank" attribute`},
		{"json:/order/nope", msg.Body, "body has no /order/nope"},
		{"json:/order/empty", msg.Body, "/order/empty is empty"},
		{"json:/order/null", msg.Body, "not a string or number"},
		{"json:/order/yes", msg.Body, "not a string or number"},
		{"json:/order/obj", msg.Body, "not a string or number"},
		{"json:/list/2", msg.Body, "body has no /list/2"},
		{"json:/list/01", msg.Body, "body has no /list/01"},
		{"json:/list/-1", msg.Body, "body has no /list/-1"},
		{"json:/order/id/x", msg.Body, "body has no /order/id/x"},
		{"json:/id", "not json", "body is not JSON"},
		{"json:/id", `{"id":"a"} {"id":"b"}`, "not one JSON value"},
		{"json:/id", ``, "body is not JSON"},
	}
	for _, c := range bad {
		k, err := dedup.ParseKeySource(c.source)
		require.NoError(t, err)
		m := msg
		m.Body = c.body
		got, err := k.Extract(m)
		require.Error(t, err, c.source)
		require.Empty(t, got)
		require.True(t, effect.IsPermanent(err), "%s: %v is not permanent", c.source, err)
		require.ErrorContains(t, err, c.msg, c.source)
		if strings.HasPrefix(c.source, "json:") {
			require.ErrorContains(t, err, "dedup key source "+c.source, "the message names the source")
		}
	}
}

func TestPayloadHash(t *testing.T) {
	t.Parallel()
	require.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", dedup.PayloadHash(""))
	require.NotEqual(t, dedup.PayloadHash("a"), dedup.PayloadHash("b"))
}

func TestKeyFunc(t *testing.T) {
	t.Parallel()
	k := dedup.KeyFunc(func(m effect.Message) (string, error) {
		if m.Body == "bad" {
			return "", errors.New("no order id")
		}
		return strings.ToUpper(m.Body), nil
	})
	got, err := k.Extract(effect.Message{Body: "o-1"})
	require.NoError(t, err)
	require.Equal(t, "O-1", got)
	_, err = k.Extract(effect.Message{Body: "bad"})
	require.True(t, effect.IsPermanent(err))
	require.ErrorContains(t, err, "no order id")
	_, err = k.Extract(effect.Message{Body: ""})
	require.True(t, effect.IsPermanent(err), "an empty key is permanent")
	require.Equal(t, "func", k.String())
}
