package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/exactlyonce/exactly/outbox"
)

// SQS's message limits other than size, in the outbox half (issue 19):
// attributes per message, MessageGroupId and MessageDeduplicationId
// lengths and characters, attribute names. In half of the outbox worlds
// (by seed: obEdgesWorld, drawn apart from the shape so that every other
// seed's world is unchanged), the producer's Writes sit at, just under and
// just over each:
//   - 9 and 8 caller attributes (SQS sees 10 and 9 with the relay's
//     idempotency-key), names of 256 characters, with periods inside,
//     hyphens, underscores, "AWS" and "Amazon" not followed by a period;
//     values with a tab and the highest code points SQS takes: published;
//   - ids and groups of 128 and 127 characters and of the punctuation SQS
//     takes ('/', '#', '"', '\\', '~', ...): published (a group holding '/'
//     or a key past 128 characters makes the relay hash its key; a group
//     holding '#' is read back from the outbox's partition key);
//   - refused by Write (ErrInvalid, nothing written): 10 caller
//     attributes, an id or group of 129 characters, one holding a space or
//     a character past ASCII, and attribute names SQS refuses (leading,
//     trailing or double period, "AWS." or "amazon.", 257 characters,
//     idempotency-key itself) or an empty value.
//
// Judged: a refused Write returns ErrInvalid (else a violation naming the
// limit); nothing of it is written (its group holds only the messages
// Write took: obCheck; a refused group's partition is empty: obEdgesCheck)
// nor published (published1); every other message is published and
// applied once in its group's order (the outbox half's and the consumer
// half's invariants), and every copy a worker receives carries its group
// and its caller's attributes as written (obReceived).

// obEdgesWorld reports whether seed's outbox half (if drawn) writes at
// SQS's limits on attributes, ids and groups.
func obEdgesWorld(seed uint64) bool { return hash64(seed, "ob edges")%2 == 0 }

// sqsAttributes is SQS's limit of message attributes, the relay's
// idempotency-key among them: the sim's own number, not the product's
// (outbox.MaxAttributes), so that a wrong product constant is judged.
const sqsAttributes = 10

// edgeChars are the printable ASCII punctuation SQS takes in an id or a
// group, padding ids and groups to their lengths.
const edgeChars = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// padTo makes s exactly n characters long with edgeChars.
func padTo(s string, n int) string {
	var b strings.Builder
	b.WriteString(s)
	for i := 0; b.Len() < n; i++ {
		b.WriteByte(edgeChars[i%len(edgeChars)])
	}
	return b.String()[:n]
}

// obGroupName is the outbox half's group g: in an edges world, some of
// 128 and 127 characters, some holding '/', '#', '"' and '\\'.
func (o *obHalf) obGroupName(g int) string {
	base := fmt.Sprintf("o%d", g)
	if !o.edges {
		return base
	}
	switch hash64(o.w.cfg.Seed, "ob edge group", strconv.Itoa(g)) % 5 {
	case 1:
		return padTo(base+"-", 128)
	case 2:
		return padTo(base+"-", 127)
	case 3:
		return base + `/#"\~`
	}
	return base
}

// edgeAttrs are n caller attributes at SQS's edges (n <= 10).
func edgeAttrs(lid, n int) map[string]string {
	names := []string{
		"n" + strings.Repeat("a", 255), // 256 characters
		"a.b.c", "under_score", "hyphen-ated", "AWSx", "amazonian", "Z9", "x", "t.AWS.x", "tenth",
	}
	a := map[string]string{}
	for i := range n {
		v := fmt.Sprintf("v%d-%d", lid, i)
		switch i % 3 {
		case 1:
			v += "\t\U0010FFFF\uFFFD"
		case 2:
			v += strings.Repeat("é", 40)
		}
		a[names[i]] = v
	}
	return a
}

// obEdgeMsg is message lid's id and caller attributes in an edges world
// (id unchanged and no attributes elsewhere).
func (o *obHalf) obEdgeMsg(lid int, id string) (string, map[string]string) {
	if !o.edges {
		return id, nil
	}
	x := hash64(o.w.cfg.Seed, "ob edge msg", strconv.Itoa(lid))
	switch x % 6 {
	case 0:
		id = padTo(id+"-", 128)
	case 1:
		id = padTo(id+"-", 127)
	case 2:
		id += `!~"\/#`
	}
	n := []int{sqsAttributes - 1, sqsAttributes - 2, 1, 0, 0}[(x>>8)%5]
	if n == 0 {
		return id, nil
	}
	return id, edgeAttrs(lid, n)
}

// obEdgeRefusal is, now and then in an edges world, a Write Write must
// refuse, planned just before message lid of group: one past a limit.
func (o *obHalf) obEdgeRefusal(q, group string, lid int) *obOver {
	if !o.edges {
		return nil
	}
	x := hash64(o.w.cfg.Seed, "ob edge refused", strconv.Itoa(lid))
	if x%3 != 0 {
		return nil
	}
	id := fmt.Sprintf("ob-%d-refused", lid)
	r := &obOver{queue: q, group: group, id: id, body: obBody("refused", lid, group, id, 0)}
	switch (x >> 8) % 12 {
	case 0:
		r.attrs, r.why = edgeAttrs(lid, sqsAttributes), "10 caller attributes (11 with the relay's key)"
	case 1:
		r.id, r.why = padTo(id+"-", 129), "an id of 129 characters"
	case 2:
		r.group, r.why = padTo(group+"-", 129), "a group of 129 characters"
	case 3:
		r.id, r.why = id+" x", "an id holding a space"
	case 4:
		r.group, r.why = group+"é", "a group holding a character past ASCII"
	case 5:
		r.id, r.why = id+"\x7f", "an id holding DEL"
	default:
		name := []string{".lead", "trail.", "a..b", "AWS.x", "amazon.y", "n" + strings.Repeat("b", 256), outbox.IdempotencyKeyAttribute}[(x>>16)%7]
		r.attrs, r.why = map[string]string{"ok": "1", name: "v"}, fmt.Sprintf("an attribute named %q", name)
		if len(name) > 256 {
			r.why = "an attribute name of 257 characters"
		}
		if (x>>24)%4 == 0 {
			r.attrs, r.why = map[string]string{"ok": "1", "empty": ""}, "an attribute with an empty value"
		}
	}
	return r
}

// obIDOf is the ID message s was written with.
func (o *obHalf) obIDOf(s *msgSpec) string { return o.ids[s.lid] }

// obReceived judges the outbox's messages among what a worker received:
// their group and their caller's attributes as written, the relay's key
// besides.
func (w *world) obReceived(q string, ms []types.Message) {
	o := w.ob
	if !o.edges {
		return
	}
	for _, m := range ms {
		s := o.byKey[aws.ToString(m.MessageAttributes[outbox.IdempotencyKeyAttribute].StringValue)]
		if s == nil {
			continue
		}
		got := map[string]string{}
		for k, v := range m.MessageAttributes {
			if k != outbox.IdempotencyKeyAttribute {
				got[k] = aws.ToString(v.DataType) + ":" + aws.ToString(v.StringValue)
			}
		}
		want := map[string]string{}
		for k, v := range o.attrs[s.lid] {
			want[k] = "String:" + v
		}
		if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != s.group || !maps.Equal(got, want) {
			w.violate("outbox: message %d received from %s in group %q with attributes %v, written in group %q with %v", s.lid, q, g, slices.Sorted(maps.Keys(got)), s.group, slices.Sorted(maps.Keys(want)))
		}
		w.stat(fmt.Sprintf("outbox: copies received with %d attributes at SQS", len(m.MessageAttributes)), 1)
		for what, n := range map[string]int{"a group": len(s.group), "an id": len(o.ids[s.lid])} {
			if n >= 127 {
				w.stat(fmt.Sprintf("outbox: copies received with %s of %d characters", what, n), 1)
			}
		}
	}
}

// obEdgesCheck: a group Write refused holds nothing in the outbox.
func (w *world) obEdgesCheck(ctx context.Context) {
	o := w.ob
	for _, wr := range o.writes {
		if wr.over == nil || o.byGroup[wr.over.group] != nil {
			continue // a refusal in a group of accepted messages: obCheck counts them
		}
		items, err := o.group(ctx, w.urls[wr.over.queue]+"#"+wr.over.group)
		if err != nil || len(items) > 0 {
			w.violate("outbox: end: group %q, whose Write was refused (%s), holds %d items (%v)", wr.over.group, wr.over.why, len(items), err)
		}
	}
}

// waitTime is the pool workers' Config.WaitTime: SQS's long-poll bounds,
// 1 s in one world in eight (by seed, apart from the shape), else 20 s
// (the default, the other bound).
func (w *world) waitTime() time.Duration {
	if hash64(w.cfg.Seed, "wait time")%8 == 0 {
		w.stat("pool: workers started with WaitTime 1s", 1)
		return time.Second
	}
	return 20 * time.Second
}
