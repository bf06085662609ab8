package dedup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/exactlyonce/exactly/internal/awserr"
)

// API is the part of the DynamoDB client the ledger uses. *dynamodb.Client
// satisfies it, and so does the in-memory implementation used by fast tests.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Store is the dedup ledger in one DynamoDB table.
type Store struct {
	db    API
	table string
	now   func() time.Time
	// The claim condition's parts that never change, built once: every
	// request reads them, none writes them.
	claimCond  *string
	claimNames map[string]string
	inProgress types.AttributeValue
	completed  types.AttributeValue
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock the conditions are evaluated against (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// NewStore returns a ledger on table.
func NewStore(db API, table string, opts ...Option) *Store {
	s := &Store{
		db: db, table: table, now: time.Now,
		claimCond: aws.String(claimCondition),
		claimNames: map[string]string{
			"#pk": AttrPK, "#exp": AttrExpiresAt, "#st": AttrStatus, "#lu": AttrLeaseUntil,
		},
		inProgress: str(StatusInProgress),
		completed:  str(StatusCompleted),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// ClaimRequest describes one claim.
type ClaimRequest struct {
	Key           string        // scoped key (see Scope.Key)
	PayloadSHA256 string        // hex SHA-256 of the message body
	MessageID     string        // for operators
	Group         string        // for operators
	Attempts      int           // the message's receive count, for operators
	Lease         time.Duration // how long the claim is exclusive unless extended
	// LeaseUntil, when set, is when the lease ends instead of Lease after
	// the claim: a deadline that must not be counted again from a later
	// start. It is on time.Now's clock, as a context's deadline is.
	LeaseUntil time.Time
	TTL        time.Duration // how long the record suppresses duplicates
	// Token is the claim's fencing token; empty: a new random one. A claim
	// retried after an error (its put may have taken effect, its response
	// lost) passes the token of the first try, so that a record it wrote is
	// recognised as its own instead of blocking it as busy.
	Token string
}

// Claim is the result of a claim attempt.
type Claim struct {
	Outcome    Outcome
	Key        string
	Token      string    // fencing token; set when Outcome is Won
	LeaseUntil time.Time // set when Outcome is Won
	// ExpiresAt is the record's expires_at while the claim holds it (Won).
	// It never falls before LeaseUntil: a record that expired while its
	// lease was live would be treated as absent and could be claimed twice.
	ExpiresAt time.Time
	// Record is the record that blocked the claim (Duplicate, Conflict, Busy).
	Record *Record
	// Remaining is the rest of the other worker's lease (Busy).
	Remaining time.Duration
}

const claimCondition = "attribute_not_exists(#pk) OR #exp < :now_s OR (#st = :inprog AND #lu < :now_ms)"

// Claim tries to take the record for req.Key with one conditional PutItem.
// The condition treats an expired record (TTL not yet swept) as absent and an
// IN_PROGRESS record whose lease ended as free to take over.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if req.Key == "" {
		return Claim{}, errors.New("dedup: empty key")
	}
	if (req.Lease <= 0 && req.LeaseUntil.IsZero()) || req.TTL <= 0 {
		return Claim{}, fmt.Errorf("dedup: lease (%s) and ttl (%s) must be positive", req.Lease, req.TTL)
	}
	if req.PayloadSHA256 == "" {
		return Claim{}, errors.New("dedup: claim without a payload hash (conflicts could not be told from duplicates)")
	}
	now := s.now()
	token, err := tokenOf(req)
	if err != nil {
		return Claim{}, err
	}
	leaseUntil := now.Add(req.Lease)
	if !req.LeaseUntil.IsZero() {
		// Onto the store's clock, which only tests and the simulation set
		// apart from time.Now: read next to now, the end stays where it
		// was (never later).
		left := time.Until(req.LeaseUntil)
		if left <= 0 {
			return Claim{}, fmt.Errorf("dedup: claim of %q: its lease had to end by %s, which has passed", req.Key, req.LeaseUntil.Format(time.RFC3339Nano))
		}
		leaseUntil = now.Add(left)
	}
	expiresAt := expiry(now.Add(req.TTL), leaseUntil)
	item := s.recordItem(req, token, StatusInProgress, now, leaseUntil, expiresAt)
	_, err = s.db.PutItem(ctx, s.claimPut(item, now))
	won := Claim{Outcome: Won, Key: req.Key, Token: token, LeaseUntil: leaseUntil, ExpiresAt: expiresAt}
	if err == nil {
		return won, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return Claim{}, fmt.Errorf("dedup: cannot claim %q: %w", req.Key, err)
	}
	if len(ccf.Item) == 0 {
		// The condition can only fail on an existing item; without it we
		// cannot tell duplicate from busy, so this is an error, never "won".
		return Claim{}, fmt.Errorf("dedup: claim of %q failed its condition but returned no item", req.Key)
	}
	rec, err := DecodeRecord(ccf.Item)
	if err != nil {
		return Claim{}, err
	}
	if rec.Token == token {
		// Our own put succeeded and its response was lost; the SDK or the
		// caller (same token) retried: the record is ours. (Tokens are
		// random per claim.)
		if rec.Status != StatusInProgress {
			return Claim{}, fmt.Errorf("dedup: claim of %q: record under this claim's token is %s", req.Key, rec.Status)
		}
		// The lease runs from the put that took effect, not from this one.
		won.LeaseUntil, won.ExpiresAt = rec.LeaseUntil, rec.ExpiresAt
		return won, nil
	}
	return blocked(req, rec, now), nil
}

// tokenOf returns req's token, or a new one.
func tokenOf(req ClaimRequest) (string, error) {
	if req.Token != "" {
		return req.Token, nil
	}
	return NewToken()
}

// recordItem is the record a claim (IN_PROGRESS) or an optimistic commit
// (COMPLETED) puts. The map has room for what a commit adds (completed_at,
// result); equal times share one value, and a status is the store's (an
// attribute value is only read once built).
func (s *Store) recordItem(req ClaimRequest, token, status string, now, leaseUntil, expiresAt time.Time) map[string]types.AttributeValue {
	// The record's values in two allocations and their digits in one, not
	// one or two each: they live and die with the item.
	strs := new([5]types.AttributeValueMemberS)
	nums := new([4]types.AttributeValueMemberN)
	digits := decimals([4]int64{now.UnixMilli(), leaseUntil.UnixMilli(), expiresAt.Unix(), int64(req.Attempts)})
	for i := range nums {
		nums[i].Value = digits[i]
	}
	created, lease := &nums[0], &nums[1]
	if leaseUntil.Equal(now) {
		lease = created
	}
	item := make(map[string]types.AttributeValue, 12)
	strs[0].Value, strs[1].Value, strs[2].Value = req.Key, token, req.PayloadSHA256
	item[AttrPK] = &strs[0]
	switch status {
	case StatusInProgress:
		item[AttrStatus] = s.inProgress
	case StatusCompleted:
		item[AttrStatus] = s.completed
	default:
		item[AttrStatus] = str(status)
	}
	item[AttrToken] = &strs[1]
	item[AttrLeaseUntil] = lease
	item[AttrExpiresAt] = &nums[2]
	item[AttrPayloadSHA256] = &strs[2]
	item[AttrAttempts] = &nums[3]
	item[AttrCreatedAt] = created
	if req.MessageID != "" {
		strs[3].Value = req.MessageID
		item[AttrMessageID] = &strs[3]
	}
	if req.Group != "" {
		strs[4].Value = req.Group
		item[AttrGroup] = &strs[4]
	}
	return item
}

// decimals formats ns in base 10 as slices of one string: one allocation.
func decimals(ns [4]int64) [4]string {
	var buf [4 * 20]byte
	var ends [4]int
	b := buf[:0]
	for i, n := range ns {
		b = strconv.AppendInt(b, n, 10)
		ends[i] = len(b)
	}
	all := string(b)
	var out [4]string
	start := 0
	for i := range out {
		out[i], start = all[start:ends[i]], ends[i]
	}
	return out
}

// claimPut puts item (a recordItem made at now) on the claim's condition:
// the key is absent, expired, or IN_PROGRESS with its lease ended. A failed
// condition returns the blocking record (ALL_OLD).
func (s *Store) claimPut(item map[string]types.AttributeValue, now time.Time) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 s.claimCond,
		ExpressionAttributeNames:            s.claimNames,
		ExpressionAttributeValues:           s.claimValues(item, now),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// claimValues are the claim condition's values at now, for item (a
// recordItem made at now): its created_at is now in milliseconds already,
// and is shared.
func (s *Store) claimValues(item map[string]types.AttributeValue, now time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":now_s":  num(now.Unix()),
		":now_ms": item[AttrCreatedAt],
		":inprog": s.inProgress,
	}
}

// blocked tells what a record of another claim that failed req's put
// means: a duplicate, a conflict, or another worker's live lease.
func blocked(req ClaimRequest, rec *Record, now time.Time) Claim {
	c := Claim{Key: req.Key, Record: rec}
	switch {
	case rec.Status == StatusCompleted && (rec.PayloadSHA256 == req.PayloadSHA256 || !Comparable(rec.PayloadSHA256, req.PayloadSHA256)):
		// Fingerprints of different kinds (the payload source changed, or
		// none) cannot tell a conflict: the completed key stands.
		c.Outcome = Duplicate
	case rec.Status == StatusCompleted:
		c.Outcome = Conflict
	default:
		c.Outcome = Busy
		c.Remaining = max(rec.LeaseUntil.Sub(now), 0)
	}
	return c
}

// Complete marks the claim COMPLETED, storing result for duplicates, and
// restarts the record's TTL. It is conditioned on the claim's token only, so a
// retry after a lost response succeeds again instead of reporting a lost lease.
func (s *Store) Complete(ctx context.Context, c Claim, result []byte, ttl time.Duration) error {
	in, err := s.completeUpdate(c, result, ttl, "#tok = :tok")
	if err != nil {
		return err
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		if isConditionFailed(err) {
			return ErrLeaseLost
		}
		return commitError(c.Key, err)
	}
	return nil
}

// CompleteTx commits the effect's writes and the COMPLETED record in one
// TransactWriteItems conditioned on the claim's token and IN_PROGRESS status:
// if the lease was lost, nothing is applied (ErrLeaseLost). If one of the
// effect's writes fails its own condition, nothing is applied and an
// *EffectConditionError says which. A commit that cannot fit one
// transaction fails before any request (ErrTooLarge). A retry after a lost
// response is recognised (the record is COMPLETED under this token) and
// reported as done.
func (s *Store) CompleteTx(ctx context.Context, c Claim, result []byte, ttl time.Duration, writes []types.TransactWriteItem) error {
	up, err := s.completeUpdate(c, result, ttl, "#tok = :tok AND #st = :inprog")
	if err != nil {
		return err
	}
	up.ExpressionAttributeValues[":inprog"] = str(StatusInProgress)
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                           up.TableName,
		Key:                                 up.Key,
		UpdateExpression:                    up.UpdateExpression,
		ConditionExpression:                 up.ConditionExpression,
		ExpressionAttributeNames:            up.ExpressionAttributeNames,
		ExpressionAttributeValues:           up.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	items = append(items, writes...)
	if err := checkSize(c.Key, items); err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	// The record's own condition first: when the lease is lost, whatever
	// the effect's writes say is moot.
	rec, err := cancelled(c.Key, len(items), err)
	if rec == nil {
		return err
	}
	if r, derr := DecodeRecord(rec); derr == nil && r.Status == StatusCompleted && r.Token == c.Token {
		return nil // our own commit, whose response was lost
	}
	return ErrLeaseLost
}

// cancelled reads the error of a commit transaction of n items whose first
// is the record, written with ALL_OLD. When the record's own condition
// failed, it returns the record as it was (empty but not nil when DynamoDB
// sent none) and a nil error: the caller judges it. Otherwise the error
// says why: an *EffectConditionError (one of the effect's writes failed its
// condition), ErrInvalid (DynamoDB rejected the request), or an error that
// is no verdict (TransactionConflict, throttling, a timeout), to retry.
// Nothing was applied in any case.
func cancelled(key string, n int, err error) (map[string]types.AttributeValue, error) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, commitError(key, err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) != n {
		return nil, fmt.Errorf("dedup: cannot commit %q: %d cancellation reasons for %d items: %w", key, len(reasons), n, err)
	}
	old, verdict := reasonsVerdict(key, reasons, err)
	if old != nil || verdict != nil {
		return old, verdict
	}
	// Anything else (TransactionConflict with a concurrent transaction,
	// throttling) is not a verdict on the claim or the effect: the caller
	// retries with the same claim.
	return nil, fmt.Errorf("dedup: cannot commit %q (cancellation reasons %s): %w", key, reasonCodes(reasons), err)
}

// reasonsVerdict reads the cancellation reasons of one commit's items (its
// record first): the record as it was when the record's own condition
// failed (empty but not nil when DynamoDB sent none), or the verdict on
// the effect's writes (an *EffectConditionError, ErrInvalid); both nil
// when the reasons hold no verdict on this commit.
func reasonsVerdict(key string, reasons []types.CancellationReason, err error) (map[string]types.AttributeValue, error) {
	if aws.ToString(reasons[0].Code) == conditionFailedCode {
		if reasons[0].Item == nil {
			return map[string]types.AttributeValue{}, nil
		}
		return reasons[0].Item, nil
	}
	for i := 1; i < len(reasons); i++ {
		if code := aws.ToString(reasons[i].Code); code == conditionFailedCode {
			return nil, &EffectConditionError{Index: i - 1, Code: code, Reason: aws.ToString(reasons[i].Message)}
		}
	}
	for _, r := range reasons {
		if aws.ToString(r.Code) == "ValidationError" {
			return nil, fmt.Errorf("%w: cannot commit %q (cancellation reasons %s): %w", ErrInvalid, key, reasonCodes(reasons), err)
		}
	}
	return nil, nil
}

// commitError wraps an error of a commit that is not a cancellation: a
// ValidationException is ErrInvalid (permanent); anything else is left for
// the caller to retry.
func commitError(key string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return fmt.Errorf("%w: cannot commit %q: %w", ErrInvalid, key, err)
	}
	return fmt.Errorf("dedup: cannot commit %q: %w", key, err)
}

// IsTransactionConflict reports whether err is DynamoDB's answer to a write
// that met a concurrent transaction on one of its items: a transaction
// cancelled for TransactionConflict, or a single write's
// TransactionConflictException. The SDK does not retry either; trying again
// at once usually succeeds.
func IsTransactionConflict(err error) bool { return awserr.TransactionConflict(err) }

// conditionFailedCode is the cancellation reason of a failed condition.
const conditionFailedCode = "ConditionalCheckFailed"

func reasonCodes(rs []types.CancellationReason) string {
	codes := make([]string, len(rs))
	for i, r := range rs {
		codes[i] = aws.ToString(r.Code)
	}
	return "[" + strings.Join(codes, ", ") + "]"
}

func (s *Store) completeUpdate(c Claim, result []byte, ttl time.Duration, cond string) (*dynamodb.UpdateItemInput, error) {
	if len(result) > MaxStoredBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrResultTooLarge, len(result), MaxStoredBytes)
	}
	if c.Token == "" {
		return nil, errors.New("dedup: complete without a won claim")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("dedup: ttl (%s) must be positive", ttl)
	}
	now := s.now()
	expr := "SET #st = :done, #ca = :now_ms, #exp = :exp"
	names := map[string]string{"#st": AttrStatus, "#ca": AttrCompletedAt, "#exp": AttrExpiresAt, "#tok": AttrToken}
	values := map[string]types.AttributeValue{
		":done":   str(StatusCompleted),
		":now_ms": num(now.UnixMilli()),
		":exp":    num(now.Add(ttl).Unix()),
		":tok":    str(c.Token),
	}
	if len(result) > 0 {
		expr += ", #res = :res"
		names["#res"] = AttrResult
		values[":res"] = &types.AttributeValueMemberB{Value: result}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       keyOf(c.Key),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}, nil
}

// Extend moves the claim's lease to now+lease (the heartbeat), and the
// record's expiry with it if the lease would outlive it. It succeeds while
// the token still owns the IN_PROGRESS record, even if the lease had ended
// meanwhile (nobody took it over); otherwise it returns ErrLeaseLost.
func (s *Store) Extend(ctx context.Context, c *Claim, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("dedup: lease (%s) must be positive", lease)
	}
	until := s.now().Add(lease)
	var exp *time.Time
	if !c.ExpiresAt.IsZero() && until.After(c.ExpiresAt) {
		e := expiry(c.ExpiresAt, until)
		exp = &e
	}
	if err := s.fenced(ctx, *c, until, exp); err != nil {
		return err
	}
	c.LeaseUntil = until
	if exp != nil {
		c.ExpiresAt = *exp
	}
	return nil
}

// Release gives the claim up so the next delivery can claim at once (after a
// retryable failure). The record stays, IN_PROGRESS with an ended lease.
// A completed record is never released (ErrLeaseLost).
func (s *Store) Release(ctx context.Context, c Claim) error {
	return s.fenced(ctx, c, time.UnixMilli(0), nil)
}

// fenced sets lease_until (and expires_at when exp is set) on the record if
// the claim's token still owns it IN_PROGRESS.
func (s *Store) fenced(ctx context.Context, c Claim, lu time.Time, exp *time.Time) error {
	if c.Token == "" {
		return errors.New("dedup: lease update without a won claim")
	}
	expr := "SET #lu = :lu"
	names := map[string]string{"#lu": AttrLeaseUntil, "#tok": AttrToken, "#st": AttrStatus}
	values := map[string]types.AttributeValue{
		":lu": num(lu.UnixMilli()), ":tok": str(c.Token), ":inprog": str(StatusInProgress),
	}
	if exp != nil {
		expr += ", #exp = :exp"
		names["#exp"] = AttrExpiresAt
		values[":exp"] = num(exp.Unix())
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       keyOf(c.Key),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#tok = :tok AND #st = :inprog"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		if isConditionFailed(err) {
			return ErrLeaseLost
		}
		return fmt.Errorf("dedup: cannot update lease of %q: %w", c.Key, err)
	}
	return nil
}

// expiry returns the later of ttlEnd and leaseEnd, in whole seconds rounded
// up: expires_at must not fall before the end of a live lease.
func expiry(ttlEnd, leaseEnd time.Time) time.Time {
	t := ttlEnd
	if leaseEnd.After(t) {
		t = leaseEnd
	}
	if r := t.Truncate(time.Second); r.Before(t) {
		return r.Add(time.Second)
	}
	return t
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// NewToken returns a random fencing token.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dedup: cannot make a token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func keyOf(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(k)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// DecodeRecord reads a dedup record item.
func DecodeRecord(item map[string]types.AttributeValue) (*Record, error) {
	if len(item) == 0 {
		return nil, errors.New("dedup: empty record")
	}
	r := &Record{
		Key:           GetS(item, AttrPK),
		Status:        GetS(item, AttrStatus),
		Token:         GetS(item, AttrToken),
		PayloadSHA256: GetS(item, AttrPayloadSHA256),
		MessageID:     GetS(item, AttrMessageID),
		Group:         GetS(item, AttrGroup),
		Attempts:      int(GetN(item, AttrAttempts)),
		LeaseUntil:    time.UnixMilli(GetN(item, AttrLeaseUntil)),
		ExpiresAt:     time.Unix(GetN(item, AttrExpiresAt), 0),
		CreatedAt:     time.UnixMilli(GetN(item, AttrCreatedAt)),
	}
	if ms := GetN(item, AttrCompletedAt); ms > 0 {
		r.CompletedAt = time.UnixMilli(ms)
	}
	if b, ok := item[AttrResult].(*types.AttributeValueMemberB); ok {
		r.Result = b.Value
	}
	decodeConflicts(item, r)
	if r.Status != StatusInProgress && r.Status != StatusCompleted {
		return nil, fmt.Errorf("dedup: record %q has unknown status %q", r.Key, r.Status)
	}
	return r, nil
}

// GetS returns item's string attribute k, or "" when it is missing or not a string.
func GetS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// GetN returns item's number attribute k as an integer, or 0 when it is
// missing, not a number or not an integer.
func GetN(item map[string]types.AttributeValue, k string) int64 {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}
