package effect

import (
	"errors"
	"time"
)

// PermanentError marks a failure that no retry can fix (a malformed body, a
// rejected request). The message is left to the queue's redrive policy or moved
// to the dead-letter queue; the rest of its FIFO group in the batch is not run.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a permanent failure.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// RetryableError asks for the message to be retried, no sooner than After
// when After is positive (from a Retry-After header, for example).
type RetryableError struct {
	Err   error
	After time.Duration
}

func (e *RetryableError) Error() string { return "retryable: " + e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// RetryAfter wraps err as retryable no sooner than d.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err, After: d}
}

// IsPermanent reports whether err carries a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// RetryDelay returns the delay a RetryableError in err asks for, or 0.
func RetryDelay(err error) time.Duration {
	var r *RetryableError
	if errors.As(err, &r) {
		return r.After
	}
	return 0
}
