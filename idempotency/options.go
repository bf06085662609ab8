package idempotency

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// Option tunes one wrapped function.
type Option func(*settings)

type settings struct {
	keyPtrs    []string
	keyFunc    func(in any) (string, error)
	keyFuncIn  reflect.Type // the In of KeyFunc
	validate   []string
	noValidate bool
	allowNoKey bool
	expiry     time.Duration
	optimistic bool
}

// errNoKey marks an input without the key its options point at.
var errNoKey = errors.New("no key")

// KeyPointers takes the key from the input's JSON at these RFC 6901
// pointers (strings or numbers), joined: KeyPointers("/customer", "/order")
// keys by customer and order. Without KeyPointers or KeyFunc, the key is the
// SHA-256 of the whole input's JSON. The Powertools counterpart is
// event_key_jmespath. A pointer that is not one ("order" for "/order")
// makes Wrap panic.
func KeyPointers(ptrs ...string) Option {
	return func(s *settings) { s.keyPtrs = append(s.keyPtrs, ptrs...) }
}

// KeyFunc takes the key from the input with f. An empty key counts as
// missing (see AllowMissingKey). f must accept the wrapped function's In
// (Wrap panics otherwise).
func KeyFunc[In any](f func(In) string) Option {
	return func(s *settings) {
		s.keyFuncIn = reflect.TypeFor[In]()
		s.keyFunc = func(in any) (string, error) {
			v, ok := in.(In)
			if !ok {
				return "", fmt.Errorf("KeyFunc takes %T, the function's input is %T", *new(In), in)
			}
			if k := f(v); k != "" {
				return k, nil
			}
			return "", fmt.Errorf("%w: KeyFunc returned an empty key", errNoKey)
		}
	}
}

// ValidatePointers fingerprints only these parts of the input's JSON: a
// duplicate whose parts differ gets ErrPayloadMismatch, one that differs
// elsewhere (a timestamp a retry adds) is a duplicate. By default the whole
// input is fingerprinted.
//
// A fingerprint names how it was made (the whole input, these pointers in
// this order, or none), and fingerprints made differently are not
// compared. So after a change of ValidatePointers (or of NoValidation), a
// call whose key was completed under the old setting is a duplicate
// whatever its payload: it gets the stored result and is not run, neither
// run twice nor failed with ErrPayloadMismatch. Payload validation is back
// for a key once its old record has expired (Expiry). A pointer that is
// not one makes Wrap panic, as in KeyPointers.
func ValidatePointers(ptrs ...string) Option {
	return func(s *settings) { s.validate = append(s.validate, ptrs...) }
}

// NoValidation turns payload validation off: any input with a completed
// key gets its stored result.
func NoValidation() Option { return func(s *settings) { s.noValidate = true } }

// AllowMissingKey runs an input without the key that KeyPointers or
// KeyFunc point at without idempotency, with a warning logged, instead of
// failing it with ErrKeyMissing. By default a missing key is an error, so
// that a mistyped pointer cannot turn idempotency off unnoticed (the
// opposite of Powertools' default, raise_on_no_idempotency_key=False).
func AllowMissingKey() Option { return func(s *settings) { s.allowNoKey = true } }

// Optimistic commits a WrapTx function with no claim: it runs, then one
// TransactWriteItems puts the completed record (on the claim's condition)
// together with its writes: one DynamoDB request per call instead of two.
// The function may then run for a duplicate or while another call holds
// the key; its writes are dropped and the caller gets the stored result
// (or an InProgressError): safe only because its whole effect is the
// writes it returns. Wrap ignores it: its function has effects of its own.
func Optimistic() Option { return func(s *settings) { s.optimistic = true } }

// Expiry overrides Config.Expiry for this function. It must be positive
// (Wrap panics otherwise).
func Expiry(d time.Duration) Option { return func(s *settings) { s.expiry = d } }

// check says which option cannot work for a function taking in, and how
// to fix it: each such mistake would fail every call.
func (s *settings) check(in reflect.Type) error {
	if s.keyFuncIn != nil && s.keyFuncIn != in && (s.keyFuncIn.Kind() != reflect.Interface || !in.Implements(s.keyFuncIn)) {
		return fmt.Errorf("KeyFunc takes %s, but the function's input is %s: pass a func(%s) string", s.keyFuncIn, in, in)
	}
	for _, p := range s.keyPtrs {
		if err := dedup.CheckPointer(p); err != nil {
			return fmt.Errorf("KeyPointers: %w", err)
		}
	}
	for _, p := range s.validate {
		if err := dedup.CheckPointer(p); err != nil {
			return fmt.Errorf("ValidatePointers: %w", err)
		}
	}
	if s.expiry <= 0 {
		return fmt.Errorf("Expiry(%s): a completed call must answer its duplicates for a positive time: pass a positive duration (Config.Expiry's default is %s)", s.expiry, DefaultExpiry)
	}
	return nil
}

// key returns the input's raw key; an error wrapping errNoKey when the
// input has none.
func (s *settings) key(in any, doc []byte) (string, error) {
	switch {
	case s.keyFunc != nil:
		return s.keyFunc(in)
	case len(s.keyPtrs) == 0:
		return hashOf(doc), nil
	}
	parsed, err := dedup.DecodeJSON(doc)
	if err != nil {
		return "", fmt.Errorf("input %w", err)
	}
	parts := make([]string, len(s.keyPtrs))
	for i, ptr := range s.keyPtrs {
		v, ok := dedup.Pointer(parsed, ptr)
		if !ok || v == nil {
			return "", fmt.Errorf("%w: input has no %s", errNoKey, ptr)
		}
		k, err := dedup.KeyValue(v, ptr)
		if err != nil {
			return "", fmt.Errorf("%w: %w", errNoKey, err)
		}
		parts[i] = k
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	// Each part escaped, so that ("a#b", "c") and ("a", "b#c") differ.
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('#')
		}
		b.WriteString(strings.NewReplacer("%", "%25", "#", "%23").Replace(p))
	}
	return b.String(), nil
}

// fingerprint is the payload hash stored with the record.
func (s *settings) fingerprint(doc []byte) (string, error) {
	src := dedup.PayloadSource{} // the whole input
	switch {
	case s.noValidate:
		src = dedup.PayloadNone
	case len(s.validate) > 0:
		src = dedup.PayloadJSON(s.validate...)
	}
	return src.Hash(string(doc))
}
