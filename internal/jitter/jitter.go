// Package jitter is the randomness of a worker or a Lambda handler: backoff
// and retry jitter, fencing tokens and receive attempt ids. In production it
// is the runtime's (math/rand/v2's global source, crypto/rand for ids); a
// test gives it a seeded source (exactly.Config.Test.Rand) so that a run
// replays.
package jitter

import (
	crand "crypto/rand"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Rand draws from a seeded source, safely for concurrent use. A nil *Rand
// draws from the runtime's sources: the zero value is production's.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// New returns a Rand on src, or nil (the runtime's) when src is nil.
func New(src rand.Source) *Rand {
	if src == nil {
		return nil
	}
	return &Rand{r: rand.New(src)} //nolint:gosec // jitter and test seeds, not secrets
}

// Int64N returns a number in [0, n); n must be positive.
func (r *Rand) Int64N(n int64) int64 {
	if r == nil {
		return rand.Int64N(n) //nolint:gosec // jitter, not a secret
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

// Uint64 makes a non-nil Rand a rand.Source safe for concurrent use (a
// test hands one to what several goroutines draw from).
func (r *Rand) Uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Uint64()
}

// Between returns a duration in [d/2, d]: jitter around a backoff step.
func (r *Rand) Between(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(r.Int64N(int64(d/2)+1))
}

// Backoff is capped exponential backoff with jitter: base × 2^(attempt-1),
// at most maxD, drawn in [d/2, d] (Between). An attempt below 1 counts as 1.
func (r *Rand) Backoff(attempt int, base, maxD time.Duration) time.Duration {
	attempt = max(attempt, 1)
	d := time.Duration(float64(base) * math.Pow(2, float64(min(attempt-1, 30))))
	if d > maxD || d <= 0 {
		d = maxD
	}
	return r.Between(d)
}

// Read fills b with random bytes, from crypto/rand when r is nil.
func (r *Rand) Read(b []byte) error {
	if r == nil {
		_, err := crand.Read(b)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < len(b); i += 8 {
		x := r.r.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return nil
}

// ID returns 16 random bytes in hex: a fencing token, an attempt id. From
// crypto/rand when r is nil.
func (r *Rand) ID() (string, error) {
	var b [16]byte
	if err := r.Read(b[:]); err != nil {
		return "", err
	}
	var h [32]byte // hex.EncodeToString would allocate twice
	hex.Encode(h[:], b[:])
	return string(h[:]), nil
}
