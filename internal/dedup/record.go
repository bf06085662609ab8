// Package dedup owns the exactly-once ledger: one DynamoDB item per logical
// message, claimed with a conditional write, fenced by a per-claim token,
// leased for a bounded time and expired by the table's TTL.
//
// Every operation is exactly one DynamoDB request with no read before write:
// a failed condition returns the blocking item (ALL_OLD) at no extra cost.
package dedup

import (
	"errors"
	"fmt"
	"time"
)

// Record attribute names. They are the contract with the table, the Terraform
// module and operators' queries.
const (
	AttrPK            = "pk"
	AttrStatus        = "status"
	AttrToken         = "token"
	AttrLeaseUntil    = "lease_until" // epoch milliseconds
	AttrExpiresAt     = "expires_at"  // epoch seconds; the table's TTL attribute
	AttrPayloadSHA256 = "payload_sha256"
	AttrMessageID     = "message_id"
	AttrGroup         = "group"
	AttrAttempts      = "attempts"
	AttrCreatedAt     = "created_at"   // epoch milliseconds
	AttrCompletedAt   = "completed_at" // epoch milliseconds
	AttrResult        = "result"
)

// Status of a record.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
)

// MaxResultBytes bounds an effect's result (a processor's default). Results
// are replayed to duplicates and should be small. A larger result is an
// error (ErrResultTooLarge), never truncated.
const MaxResultBytes = 16 << 10

// MaxStoredBytes bounds what the store writes as a record's result: room
// for the largest HTTP response the idempotency middleware may be set to
// store (idempotency.MaxResponseBytesLimit, 368 KiB) with MaxResultBytes of
// framing (its headers). A record with it and the longest key stays below
// DynamoDB's item limit of 400 KB (the contract suite writes one).
const MaxStoredBytes = 384 << 10

// Record is a decoded dedup record, as stored.
type Record struct {
	Key           string
	Status        string
	Token         string
	LeaseUntil    time.Time
	ExpiresAt     time.Time
	PayloadSHA256 string
	MessageID     string
	Group         string
	Attempts      int
	CreatedAt     time.Time
	CompletedAt   time.Time
	Result        []byte
	// Conflicts counts the deliveries of another payload that met the
	// completed record (NoteConflict); FirstConflict and LastConflict are
	// the first and the latest of them (nil when none).
	Conflicts                   int
	FirstConflict, LastConflict *ConflictNote
}

// Outcome of a claim.
type Outcome int

const (
	// Won: the caller holds the claim and must run the effect, then complete.
	Won Outcome = iota + 1
	// Duplicate: the message was already processed with the same payload.
	// Do not run the effect; delete the message.
	Duplicate
	// Conflict: the key was completed for a different payload. Never run the
	// effect and never silently acknowledge.
	Conflict
	// Busy: another worker holds a live lease. Do not run, do not delete; retry
	// after the remaining lease.
	Busy
)

func (o Outcome) String() string {
	switch o {
	case Won:
		return "won"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	case Busy:
		return "busy"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

var (
	// ErrLeaseLost is returned by Complete, CompleteTx, Extend and Release when
	// the claim's token no longer owns the record: the lease ended and another
	// worker took it over (or the record expired). Nothing was changed.
	ErrLeaseLost = errors.New("dedup: lease lost: the record is owned by another claim")
	// ErrInvalid is wrapped by a commit that DynamoDB rejected as invalid (a
	// ValidationException, or a ValidationError cancellation reason: say an
	// effect that writes one item twice). No retry can fix it: a permanent
	// failure. Nothing was applied.
	ErrInvalid = errors.New("dedup: DynamoDB rejected the commit as invalid")
	// ErrResultTooLarge is returned when a result exceeds its bound
	// (MaxStoredBytes for the store, the processor's MaxResult).
	ErrResultTooLarge = errors.New("dedup: result too large to store")
)

// EffectConditionError is returned by CompleteTx when one of the effect's own
// writes failed its condition: the transaction was cancelled, nothing applied.
type EffectConditionError struct {
	Index  int    // index into the effect's writes
	Code   string // DynamoDB cancellation code, e.g. ConditionalCheckFailed
	Reason string
}

func (e *EffectConditionError) Error() string {
	return fmt.Sprintf("dedup: effect write %d cancelled: %s %s", e.Index, e.Code, e.Reason)
}
