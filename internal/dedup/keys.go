package dedup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/exactlyonce/exactly/effect"
)

// IdempotencyKeyAttribute is the message attribute the auto key source reads
// first: what a producer sets so that a retry after SQS's five-minute window
// is still recognised as the same logical message.
const IdempotencyKeyAttribute = "idempotency-key"

// MaxKeyPart bounds each part of a scoped key (namespace, queue, group, key)
// after escaping. A longer part is replaced by "%H" and the hex SHA-256 of
// the part, never truncated (truncation would make distinct keys collide).
// Four parts and three separators stay within DynamoDB's 2048-byte limit on
// a partition key: 4×500+3 = 2003.
const MaxKeyPart = 500

// MaxKeyBytes is DynamoDB's limit on a partition key value.
const MaxKeyBytes = 2048

// KeySource says where a message's dedup key comes from.
type KeySource struct {
	kind string // auto, attr, json, body, func
	arg  string // attribute name or JSON pointer
	fn   func(effect.Message) (string, error)
}

// KeyFunc is the key source that calls f. Its error, or an empty key, is a
// permanent failure of the message.
func KeyFunc(f func(effect.Message) (string, error)) KeySource {
	return KeySource{kind: "func", fn: f}
}

// ParseKeySource parses auto, attr:NAME, json:/pointer or body.
func ParseKeySource(s string) (KeySource, error) {
	switch {
	case s == "" || s == "auto":
		return KeySource{kind: "auto"}, nil
	case s == "body":
		return KeySource{kind: "body"}, nil
	case strings.HasPrefix(s, "attr:") && len(s) > len("attr:"):
		return KeySource{kind: "attr", arg: s[len("attr:"):]}, nil
	case strings.HasPrefix(s, "json:/"):
		return KeySource{kind: "json", arg: s[len("json:"):]}, nil
	}
	return KeySource{}, fmt.Errorf("dedup key source %q: want auto, attr:NAME, json:/pointer or body", s)
}

func (k KeySource) String() string {
	if k.arg == "" {
		if k.kind == "" {
			return "auto"
		}
		return k.kind
	}
	return k.kind + ":" + k.arg
}

// Extract returns the message's dedup key. auto takes the idempotency-key
// attribute, else the MessageDeduplicationId, else (on a queue subscribed
// to an SNS topic, raw delivery off) SNS's MessageId, else the MessageId. An explicit
// source that finds no usable key is a permanent error: such a message must
// not pass through undeduplicated.
func (k KeySource) Extract(m effect.Message) (string, error) {
	switch k.kind {
	case "", "auto":
		if v := m.Attributes[IdempotencyKeyAttribute]; v != "" {
			return v, nil
		}
		if m.DedupID != "" {
			return m.DedupID, nil
		}
		if n := m.Notification; n != nil && n.MessageID != "" {
			return n.MessageID, nil
		}
		if m.ID != "" {
			return m.ID, nil
		}
		return "", effect.Permanent(errors.New("message has no idempotency-key attribute, deduplication id or message id"))
	case "attr":
		if v := m.Attributes[k.arg]; v != "" {
			return v, nil
		}
		return "", effect.Permanent(fmt.Errorf("message has no %q attribute (dedup key source %s)", k.arg, k))
	case "body":
		return PayloadHash(m.Body), nil
	case "func":
		v, err := k.fn(m)
		if err != nil {
			return "", effect.Permanent(fmt.Errorf("dedup key function: %w", err))
		}
		if v == "" {
			return "", effect.Permanent(errors.New("dedup key function returned an empty key"))
		}
		return v, nil
	case "json":
		v, err := jsonPointer(m.Body, k.arg)
		if err != nil {
			return "", effect.Permanent(fmt.Errorf("dedup key source %s: %w", k, err))
		}
		return v, nil
	}
	return "", fmt.Errorf("dedup: unknown key source %q", k.kind)
}

// jsonPointer resolves an RFC 6901 pointer in body to a string or number.
func jsonPointer(body, ptr string) (string, error) {
	doc, err := DecodeJSON([]byte(body))
	if err != nil {
		return "", fmt.Errorf("body %w", err)
	}
	v, ok := Pointer(doc, ptr)
	if !ok {
		return "", fmt.Errorf("body has no %s", ptr)
	}
	return KeyValue(v, ptr)
}

// DecodeJSON decodes exactly one JSON value, numbers kept as json.Number.
func DecodeJSON(b []byte) (any, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("is not one JSON value: it has data after the first")
	}
	return doc, nil
}

// CheckPointer says why ptr is not an RFC 6901 JSON pointer: one that is
// neither empty (the whole document) nor starts with "/", or has a "~" not
// followed by 0 or 1. Pointer finds nothing at such a pointer, in any
// document.
func CheckPointer(ptr string) error {
	if ptr != "" && !strings.HasPrefix(ptr, "/") {
		return fmt.Errorf("%q is not a JSON pointer: it must start with \"/\" (\"/%s\")", ptr, ptr)
	}
	for i := strings.IndexByte(ptr, '~'); i >= 0; i = strings.IndexByte(ptr, '~') {
		if i+1 >= len(ptr) || (ptr[i+1] != '0' && ptr[i+1] != '1') {
			return fmt.Errorf("%q is not a JSON pointer: \"~\" must be followed by 0 (~) or 1 (/)", ptr)
		}
		ptr = ptr[i+2:]
	}
	return nil
}

// Pointer resolves an RFC 6901 JSON pointer ("/order/id") in a document
// from DecodeJSON; false when the document has no such value.
func Pointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || tok != strconv.Itoa(i) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// KeyValue is a pointed-to value as a key part: a non-empty string, or a
// number as written.
func KeyValue(v any, ptr string) (string, error) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return "", fmt.Errorf("%s is empty", ptr)
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("%s is not a string or number", ptr)
}

// Scope builds scoped keys: <namespace>#<queue>[#<group>]#<key>.
type Scope struct {
	Namespace string
	Queue     string // queue name, not URL
	// PerGroup is true when the queue's DeduplicationScope is messageGroup:
	// the same key in two groups is then two distinct messages.
	PerGroup bool
}

// Key returns the scoped key for a message of group with dedup key key:
// <namespace>#<queue>[#<group>]#<key>, the group part exactly when PerGroup.
//
// Distinct (namespace, queue, group, key) tuples never share a scoped key:
// '%' and '#' in every part are escaped (%25, %23), and a part that is longer
// than MaxKeyPart bytes after escaping, or is not valid UTF-8 (which the SDK
// would alter in transit), is replaced by "%H" and its hex SHA-256, a form
// escaping never produces. The result is at most MaxKeyBytes long.
func (s Scope) Key(group, key string) string {
	var b strings.Builder
	b.Grow(len(s.Namespace) + len(s.Queue) + len(group) + len(key) + 3)
	writePart(&b, s.Namespace)
	b.WriteByte('#')
	writePart(&b, s.Queue)
	if s.PerGroup {
		b.WriteByte('#')
		writePart(&b, group)
	}
	b.WriteByte('#')
	writePart(&b, key)
	return b.String()
}

func writePart(b *strings.Builder, part string) {
	if e := escape(part); len(e) <= MaxKeyPart && utf8.ValidString(part) {
		b.WriteString(e)
		return
	}
	sum := sha256.Sum256([]byte(part))
	b.WriteString("%H")
	b.WriteString(hex.EncodeToString(sum[:]))
}

var escaper = strings.NewReplacer("%", "%25", "#", "%23")

func escape(s string) string {
	if !strings.ContainsAny(s, "%#") {
		return s
	}
	return escaper.Replace(s)
}

// PayloadHash is the hex SHA-256 of a body, stored as payload_sha256.
func PayloadHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	var h [2 * sha256.Size]byte // hex.EncodeToString would allocate twice
	hex.Encode(h[:], sum[:])
	return string(h[:])
}
