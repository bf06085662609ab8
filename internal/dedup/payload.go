package dedup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/exactlyonce/exactly/effect"
)

// PayloadSource says what of a message is fingerprinted to tell a duplicate
// (same key, same fingerprint) from a conflict (same key, another payload).
// The zero value is "body".
type PayloadSource struct {
	kind string   // "", "body", "json", "none"
	ptrs []string // json
	tag  string   // json: identifies the pointer list in the stored hash
}

// ParsePayloadSource parses body (the whole body, byte for byte),
// json:/a,/b (the values at these JSON pointers, canonicalised: a producer
// that re-serialises its JSON or adds a field on retry is still a duplicate)
// or none (no validation: a completed key is a duplicate whatever the body).
func ParsePayloadSource(s string) (PayloadSource, error) {
	switch {
	case s == "" || s == "body":
		return PayloadSource{kind: "body"}, nil
	case s == "none":
		return PayloadSource{kind: "none"}, nil
	case strings.HasPrefix(s, "json:"):
		ptrs := strings.Split(s[len("json:"):], ",")
		for _, p := range ptrs {
			if !strings.HasPrefix(p, "/") {
				return PayloadSource{}, fmt.Errorf("payload hash %q: %q is not a JSON pointer (want json:/a,/b)", s, p)
			}
		}
		return PayloadJSON(ptrs...), nil
	}
	return PayloadSource{}, fmt.Errorf("payload hash %q: want body, json:/pointer[,/pointer...] or none", s)
}

// PayloadJSON fingerprints the values at these JSON pointers.
func PayloadJSON(ptrs ...string) PayloadSource {
	spec := sha256.Sum256([]byte(strings.Join(ptrs, "\x00")))
	return PayloadSource{kind: "json", ptrs: ptrs, tag: "j" + hex.EncodeToString(spec[:4])}
}

// PayloadNone is the source that validates nothing.
var PayloadNone = PayloadSource{kind: "none"}

func (p PayloadSource) String() string {
	switch p.kind {
	case "json":
		return "json:" + strings.Join(p.ptrs, ",")
	case "none":
		return "none"
	}
	return "body"
}

// noneHash is the fingerprint under PayloadNone.
const noneHash = "none"

// Hash fingerprints a body. The body kind is the plain hex SHA-256 (as
// records have always held); other kinds carry a prefix naming their kind,
// so that fingerprints of different kinds are never compared (see
// Comparable). A body that is not JSON under a json source is a permanent
// error.
func (p PayloadSource) Hash(body string) (string, error) {
	switch p.kind {
	case "none":
		return noneHash, nil
	case "json":
		doc, err := DecodeJSON([]byte(body))
		if err != nil {
			return "", effect.Permanent(fmt.Errorf("payload hash %s: body %w", p, err))
		}
		picked := make([]any, len(p.ptrs))
		for i, ptr := range p.ptrs {
			picked[i], _ = Pointer(doc, ptr) // absent: null
		}
		b, err := json.Marshal(picked) // objects marshal with sorted keys
		if err != nil {
			return "", effect.Permanent(fmt.Errorf("payload hash %s: %w", p, err))
		}
		sum := sha256.Sum256(b)
		return p.tag + ":" + hex.EncodeToString(sum[:]), nil
	}
	return PayloadHash(body), nil
}

// Comparable reports whether two fingerprints were made the same way, so
// that a difference means another payload. Records written before a change
// of payload source are not comparable with new fingerprints: a completed
// one is taken as a duplicate rather than dead-lettered as a conflict.
func Comparable(a, b string) bool {
	return a != noneHash && b != noneHash && kindOf(a) == kindOf(b)
}

func kindOf(h string) string {
	if i := strings.IndexByte(h, ':'); i >= 0 {
		return h[:i]
	}
	return "body"
}
