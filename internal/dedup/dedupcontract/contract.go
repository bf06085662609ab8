// Package dedupcontract is the contract of the dedup ledger, as tests: one
// suite that runs against DynamoDB Local and against the in-memory DynamoDB
// (internal/memdynamo), so that the fast tests built on the in-memory one
// cannot pass what the real one fails.
//
// Every outcome and every condition of DESIGN.md is exercised: won,
// duplicate (with the stored result replayed), conflict, busy (with the
// remaining lease), takeover after the lease ended, expired-but-unswept
// records treated as absent, fencing of Extend, Release, Complete and
// CompleteTx (ErrLeaseLost, nothing changed), the transactional commit of the
// ledger effect, lost responses, the result bound and the start-up check.
// Time is the caller's clock (dedup.WithClock), so expiry and leases are
// tested without sleeping; one zombie test uses the real clock.
package dedupcontract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// DB is the ledger's API plus what the suite needs to make tables and read
// items back. *dynamodb.Client and *memdynamo.DB satisfy it.
type DB interface {
	dedup.API
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DeleteTable(context.Context, *dynamodb.DeleteTableInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Options sizes the suite for its backend.
type Options struct {
	// RaceGoroutines claim one key at once, RaceRounds times (defaults 16, 25).
	RaceGoroutines, RaceRounds int
}

// Run runs the whole contract against db.
func Run(t *testing.T, db DB, opts Options) {
	if opts.RaceGoroutines <= 0 {
		opts.RaceGoroutines = 16
	}
	if opts.RaceRounds <= 0 {
		opts.RaceRounds = 25
	}
	s := &suite{db: db, opts: opts}
	for _, c := range []struct {
		name string
		f    func(t *testing.T)
	}{
		{"Won", s.testWon},
		{"DuplicateReplaysResult", s.testDuplicate},
		{"DuplicateWithoutResult", s.testDuplicateNoResult},
		{"Conflict", s.testConflict},
		{"ConflictNote", s.testConflictNote},
		{"PayloadSourcesAreNotCompared", s.testPayloadSources},
		{"BusyWithRemainingLease", s.testBusy},
		{"LeaseBoundary", s.testLeaseBoundary},
		{"LeaseUntilIsAnInstant", s.testLeaseUntil},
		{"TakeoverAfterLeaseEnds", s.testTakeover},
		{"ReleasedClaimIsFree", s.testRelease},
		{"ExpiredCompletedRecordIsAbsent", s.testExpiredCompleted},
		{"ExpiredInProgressRecordIsAbsent", s.testExpiredInProgress},
		{"ExpiryNeverPrecedesLease", s.testExpiryCoversLease},
		{"ExtendMovesLease", s.testExtend},
		{"FencingZombieChangesNothing", s.testFencing},
		{"CompletedRecordCannotBeReleased", s.testCompletedFenced},
		{"SweptRecordIsNotResurrected", s.testSwept},
		{"CompleteRetriedAfterLostResponse", s.testCompleteLostResponse},
		{"ClaimRetriedAfterLostResponse", s.testClaimLostResponse},
		{"CompleteTxAppliesEffectAtomically", s.testCompleteTx},
		{"CompleteTxRetriedAfterLostResponse", s.testCompleteTxLostResponse},
		{"CompleteTxEffectConditionFails", s.testCompleteTxEffectCondition},
		{"CompleteTxLeaseLostBeatsEffectCondition", s.testCompleteTxLostBeatsEffect},
		{"CompleteTxWriteLimit", s.testCompleteTxLimit},
		{"ResultSizeLimit", s.testResultLimit},
		{"InvalidArguments", s.testArguments},
		{"LongScopedKeys", s.testLongKeys},
		{"ErrorsAreNeverWon", s.testErrors},
		{"CheckTable", s.testCheck},
		{"RaceOneWinnerPerRound", s.testRace},
		{"ZombieRealClock", s.testZombieRealClock},
		{"OptimisticApplies", s.testOptimisticApplies},
		{"OptimisticBlocked", s.testOptimisticBlocked},
		{"OptimisticRetriedAfterLostResponse", s.testOptimisticLostResponse},
		{"OptimisticVerdicts", s.testOptimisticVerdicts},
		{"OptimisticRace", s.testOptimisticRace},
		{"GroupCommit", s.testGroupCommit},
		{"Carried", s.testCarried},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.f(t)
		})
	}
}

type suite struct {
	db   DB
	opts Options
}

// Clock is a settable clock for dedup.WithClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a week from now on a whole second: in the future so that
// DynamoDB Local's TTL sweeper (which uses the real clock) never deletes a
// test's records, and on a second so expires_at arithmetic is exact.
func NewClock() *Clock {
	return &Clock{now: time.Now().Add(7 * 24 * time.Hour).Truncate(time.Second)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Table creates a dedup table (pk S, TTL on expires_at) and drops it after
// the test.
func Table(t testing.TB, db DB) string {
	t.Helper()
	return makeTable(t, db, "pk", types.ScalarAttributeTypeS, false, dedup.AttrExpiresAt)
}

func makeTable(t testing.TB, db DB, key string, typ types.ScalarAttributeType, withRange bool, ttlAttr string) string {
	t.Helper()
	ctx := context.Background()
	name := testenv.Name("dedup")
	in := &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: typ}},
	}
	if withRange {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS})
	}
	_, err := db.CreateTable(ctx, in)
	require.NoError(t, err, "create table")
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	if ttlAttr != "" {
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name,
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)}})
		require.NoError(t, err, "enable TTL")
	}
	return name
}

// testPayloadSources: a record completed under one payload source is a
// duplicate, not a conflict, for a claim fingerprinted another way (the
// setting changed between a delivery and its redelivery); fingerprints of
// one kind are compared.
func (s *suite) testPayloadSources(t *testing.T) {
	f := s.setup(t)
	st := f.store()
	req := f.req("k", `{"a":1}`, time.Minute, time.Hour)
	c := f.claim(st, req, dedup.Won)
	require.NoError(t, st.Complete(f.ctx, c, []byte("r"), time.Hour))

	var err error
	req.PayloadSHA256, err = dedup.PayloadJSON("/a").Hash(`{"a":2}`)
	require.NoError(t, err)
	require.Equal(t, []byte("r"), f.claim(st, req, dedup.Duplicate).Record.Result)
	req.PayloadSHA256, err = dedup.PayloadNone.Hash(`{"a":3}`)
	require.NoError(t, err)
	f.claim(st, req, dedup.Duplicate)
	req.PayloadSHA256 = hash(`{"a":2}`)
	f.claim(st, req, dedup.Conflict)

	j := f.req("j", `{"a":1}`, time.Minute, time.Hour)
	j.PayloadSHA256, err = dedup.PayloadJSON("/a").Hash(`{"a":1,"at":"10:00"}`)
	require.NoError(t, err)
	c = f.claim(st, j, dedup.Won)
	require.NoError(t, st.Complete(f.ctx, c, nil, time.Hour))
	j.PayloadSHA256, err = dedup.PayloadJSON("/a").Hash(`{"at":"10:01","a":1}`)
	require.NoError(t, err)
	f.claim(st, j, dedup.Duplicate)
	j.PayloadSHA256, err = dedup.PayloadJSON("/a").Hash(`{"a":2}`)
	require.NoError(t, err)
	f.claim(st, j, dedup.Conflict)
}

// fixture is one test's table, clock and helpers.
type fixture struct {
	t     *testing.T
	db    DB
	table string
	clock *Clock
	ctx   context.Context
}

func (s *suite) setup(t *testing.T) *fixture {
	return &fixture{t: t, db: s.db, table: Table(t, s.db), clock: NewClock(), ctx: context.Background()}
}

// store returns a worker's view of the ledger on the shared clock.
func (f *fixture) store(opts ...dedup.Option) *dedup.Store {
	return dedup.NewStore(f.db, f.table, append([]dedup.Option{dedup.WithClock(f.clock.Now)}, opts...)...)
}

func hash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func (f *fixture) req(key, body string, lease, ttl time.Duration) dedup.ClaimRequest {
	return dedup.ClaimRequest{Key: key, PayloadSHA256: hash(body), MessageID: "m-" + body, Group: "g1",
		Attempts: 1, Lease: lease, TTL: ttl}
}

func (f *fixture) claim(st *dedup.Store, r dedup.ClaimRequest, want dedup.Outcome) dedup.Claim {
	f.t.Helper()
	c, err := st.Claim(f.ctx, r)
	require.NoError(f.t, err, "claim %s", r.Key)
	require.Equal(f.t, want, c.Outcome, "claim %s", r.Key)
	return c
}

// item reads an item back (consistently), nil when absent.
func (f *fixture) item(table, pk string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.db.GetItem(f.ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}})
	require.NoError(f.t, err)
	return out.Item
}

// snapshot renders the record for before/after comparisons.
func (f *fixture) snapshot(key string) string {
	f.t.Helper()
	return Render(f.item(f.table, key))
}

// Render prints an item canonically: names sorted, one line.
func Render(it map[string]types.AttributeValue) string {
	if it == nil {
		return "<absent>"
	}
	keys := make([]string, 0, len(it))
	for k := range it {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		switch v := it[k].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s=S%q ", k, v.Value)
		case *types.AttributeValueMemberN:
			fmt.Fprintf(&b, "%s=N%s ", k, v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "%s=B%x ", k, sha256.Sum256(v.Value))
		default:
			fmt.Fprintf(&b, "%s=%T%v ", k, v, v)
		}
	}
	return b.String()
}

func attrS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func ms(t time.Time) string { return fmt.Sprint(t.UnixMilli()) }
func sec(t time.Time) string {
	return fmt.Sprint(t.Unix())
}

const (
	lease = 30 * time.Second
	ttl   = 24 * time.Hour
)

func (s *suite) testWon(t *testing.T) {
	f := s.setup(t)
	t0 := f.clock.Now()
	c := f.claim(f.store(), dedup.ClaimRequest{Key: "k", PayloadSHA256: hash("body"), MessageID: "m1", Group: "g1",
		Attempts: 3, Lease: lease, TTL: ttl}, dedup.Won)
	require.Len(t, c.Token, 32)
	require.Equal(t, "k", c.Key)
	require.True(t, c.LeaseUntil.Equal(t0.Add(lease)))
	require.True(t, c.ExpiresAt.Equal(t0.Add(ttl)))
	require.Nil(t, c.Record)

	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusInProgress, attrS(it, dedup.AttrStatus))
	require.Equal(t, c.Token, attrS(it, dedup.AttrToken))
	require.Equal(t, ms(t0.Add(lease)), attrN(it, dedup.AttrLeaseUntil))
	require.Equal(t, sec(t0.Add(ttl)), attrN(it, dedup.AttrExpiresAt))
	require.Equal(t, hash("body"), attrS(it, dedup.AttrPayloadSHA256))
	require.Equal(t, "m1", attrS(it, dedup.AttrMessageID))
	require.Equal(t, "g1", attrS(it, dedup.AttrGroup))
	require.Equal(t, "3", attrN(it, dedup.AttrAttempts))
	require.Equal(t, ms(t0), attrN(it, dedup.AttrCreatedAt))
	require.NotContains(t, it, dedup.AttrResult)
	require.NotContains(t, it, dedup.AttrCompletedAt)

	// A second claim of a distinct key wins too: records are independent.
	f.claim(f.store(), f.req("k2", "body", lease, ttl), dedup.Won)
}

func (s *suite) testDuplicate(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	f.clock.Advance(time.Second)
	require.NoError(t, a.Complete(f.ctx, c, []byte(`{"charged":250}`), ttl))
	before := f.snapshot("k")
	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusCompleted, attrS(it, dedup.AttrStatus))
	require.Equal(t, ms(f.clock.Now()), attrN(it, dedup.AttrCompletedAt))
	require.Equal(t, sec(f.clock.Now().Add(ttl)), attrN(it, dedup.AttrExpiresAt), "completion restarts the TTL")

	f.clock.Advance(time.Hour)
	d := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	require.Empty(t, d.Token)
	require.NotNil(t, d.Record)
	require.Equal(t, []byte(`{"charged":250}`), d.Record.Result)
	require.Equal(t, dedup.StatusCompleted, d.Record.Status)
	require.Equal(t, "m-body", d.Record.MessageID)
	require.Equal(t, c.Token, d.Record.Token)
	require.False(t, d.Record.CompletedAt.IsZero())
	require.Equal(t, before, f.snapshot("k"), "a duplicate claim changed the record")
}

func (s *suite) testDuplicateNoResult(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.NoError(t, a.Complete(f.ctx, c, nil, ttl))
	d := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	require.Nil(t, d.Record.Result)
}

func (s *suite) testConflict(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body-1", lease, ttl), dedup.Won)
	require.NoError(t, a.Complete(f.ctx, c, []byte("r"), ttl))
	before := f.snapshot("k")
	x := f.claim(f.store(), f.req("k", "body-2", lease, ttl), dedup.Conflict)
	require.Empty(t, x.Token)
	require.Equal(t, hash("body-1"), x.Record.PayloadSHA256)
	require.Equal(t, before, f.snapshot("k"), "a conflicting claim changed the record")
}

func (s *suite) testBusy(t *testing.T) {
	f := s.setup(t)
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
	before := f.snapshot("k")
	f.clock.Advance(10 * time.Second)
	b := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Busy)
	require.Equal(t, lease-10*time.Second, b.Remaining)
	require.Equal(t, dedup.StatusInProgress, b.Record.Status)
	require.Empty(t, b.Token)
	// Busy whatever the payload: an IN_PROGRESS record is not yet a conflict.
	f.claim(f.store(), f.req("k", "other body", lease, ttl), dedup.Busy)
	require.Equal(t, before, f.snapshot("k"), "a busy claim changed the record")
}

func (s *suite) testLeaseBoundary(t *testing.T) {
	f := s.setup(t)
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
	f.clock.Advance(lease) // lease_until < now_ms is false at the very millisecond
	b := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Busy)
	require.Equal(t, time.Duration(0), b.Remaining)
	f.clock.Advance(time.Millisecond)
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
}

func (s *suite) testTakeover(t *testing.T) {
	f := s.setup(t)
	a := f.claim(f.store(), f.req("k", "body", 10*time.Second, ttl), dedup.Won)
	f.clock.Advance(11 * time.Second)
	r := f.req("k", "body", lease, ttl)
	r.Attempts, r.MessageID = 2, "m-second"
	b := f.claim(f.store(), r, dedup.Won)
	require.NotEqual(t, a.Token, b.Token)
	it := f.item(f.table, "k")
	require.Equal(t, b.Token, attrS(it, dedup.AttrToken))
	require.Equal(t, "2", attrN(it, dedup.AttrAttempts))
	require.Equal(t, "m-second", attrS(it, dedup.AttrMessageID))
	require.Equal(t, ms(f.clock.Now().Add(lease)), attrN(it, dedup.AttrLeaseUntil))
}

func (s *suite) testRelease(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.NoError(t, a.Release(f.ctx, c))
	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusInProgress, attrS(it, dedup.AttrStatus))
	require.Equal(t, "0", attrN(it, dedup.AttrLeaseUntil))
	b := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
	require.NotEqual(t, c.Token, b.Token)
}

func (s *suite) testExpiredCompleted(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.NoError(t, a.Complete(f.ctx, c, []byte("r"), time.Hour))
	f.clock.Advance(time.Hour) // expires_at = now_s: not yet expired
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	f.clock.Advance(time.Second) // expires_at < now_s: absent, though not swept
	require.NotNil(t, f.item(f.table, "k"), "the expired record is still there")
	n := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusInProgress, attrS(it, dedup.AttrStatus))
	require.Equal(t, n.Token, attrS(it, dedup.AttrToken))
	require.NotContains(t, it, dedup.AttrResult, "a new claim must not inherit the old result")
	require.NotContains(t, it, dedup.AttrCompletedAt)
	// An expired record with a different payload is absent too, not a conflict.
	require.NoError(t, f.store().Complete(f.ctx, n, nil, time.Minute))
	f.clock.Advance(time.Minute + time.Second)
	f.claim(f.store(), f.req("k", "another body", lease, ttl), dedup.Won)
}

func (s *suite) testExpiredInProgress(t *testing.T) {
	f := s.setup(t)
	a := f.claim(f.store(), f.req("k", "body", 10*time.Second, time.Hour), dedup.Won)
	require.True(t, a.ExpiresAt.Equal(f.clock.Now().Add(time.Hour)))
	f.clock.Advance(time.Hour + time.Second)
	b := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Won)
	require.NotEqual(t, a.Token, b.Token)
}

func (s *suite) testExpiryCoversLease(t *testing.T) {
	f := s.setup(t)
	t0 := f.clock.Now()
	// A TTL shorter than the lease: expires_at is pushed to the lease's end.
	a := f.claim(f.store(), f.req("k1", "body", 60*time.Second+500*time.Millisecond, 10*time.Second), dedup.Won)
	require.True(t, a.ExpiresAt.Equal(t0.Add(61*time.Second)), "expires_at %s", a.ExpiresAt)
	require.Equal(t, sec(t0.Add(61*time.Second)), attrN(f.item(f.table, "k1"), dedup.AttrExpiresAt))
	f.clock.Advance(60 * time.Second)
	f.claim(f.store(), f.req("k1", "body", lease, ttl), dedup.Busy)

	// Extending past the expiry pushes it too.
	f2 := s.setup(t)
	st := f2.store()
	c := f2.claim(st, f2.req("k2", "body", 20*time.Second, 30*time.Second), dedup.Won)
	f2.clock.Advance(15 * time.Second)
	require.NoError(t, st.Extend(f2.ctx, &c, 60*time.Second))
	require.True(t, c.ExpiresAt.Equal(f2.clock.Now().Add(60*time.Second)))
	require.Equal(t, sec(f2.clock.Now().Add(60*time.Second)), attrN(f2.item(f2.table, "k2"), dedup.AttrExpiresAt))
	f2.clock.Advance(50 * time.Second) // past the original expires_at, within the lease
	f2.claim(f2.store(), f2.req("k2", "body", lease, ttl), dedup.Busy)
	// An extension within the expiry leaves expires_at alone.
	before := attrN(f2.item(f2.table, "k2"), dedup.AttrExpiresAt)
	require.NoError(t, st.Extend(f2.ctx, &c, time.Second))
	require.Equal(t, before, attrN(f2.item(f2.table, "k2"), dedup.AttrExpiresAt))
}

func (s *suite) testExtend(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", 10*time.Second, ttl), dedup.Won)
	f.clock.Advance(8 * time.Second)
	require.NoError(t, a.Extend(f.ctx, &c, 10*time.Second))
	require.True(t, c.LeaseUntil.Equal(f.clock.Now().Add(10*time.Second)))
	require.Equal(t, ms(c.LeaseUntil), attrN(f.item(f.table, "k"), dedup.AttrLeaseUntil))
	f.clock.Advance(5 * time.Second)
	b := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Busy)
	require.Equal(t, 5*time.Second, b.Remaining)

	// A lease that ended but was not taken over can still be extended: the
	// token still owns the record.
	f.clock.Advance(time.Minute)
	require.NoError(t, a.Extend(f.ctx, &c, 10*time.Second))
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Busy)
	require.NoError(t, a.Complete(f.ctx, c, nil, ttl))
}

// testFencing: A's lease ends, B takes over; nothing A does changes anything.
func (s *suite) testFencing(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a, b := f.store(), f.store()
	ca := f.claim(a, f.req("k", "body", time.Second, ttl), dedup.Won)
	f.clock.Advance(2 * time.Second)
	cb := f.claim(b, f.req("k", "body", lease, ttl), dedup.Won)
	before := f.snapshot("k")

	stale := ca
	require.ErrorIs(t, a.Extend(f.ctx, &stale, lease), dedup.ErrLeaseLost)
	require.True(t, stale.LeaseUntil.Equal(ca.LeaseUntil), "a failed Extend moved the claim's lease")
	require.ErrorIs(t, a.Release(f.ctx, ca), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.Complete(f.ctx, ca, []byte("zombie"), ttl), dedup.ErrLeaseLost)
	writes := ledgerWrites(t, ledger, "k", `{"account":"a1","amount_cents":250}`)
	require.ErrorIs(t, a.CompleteTx(f.ctx, ca, []byte("zombie"), ttl, writes), dedup.ErrLeaseLost)
	require.Equal(t, before, f.snapshot("k"), "the zombie changed the record")
	require.Nil(t, f.item(ledger, "acct#a1"), "the zombie's transaction applied the effect")
	require.Nil(t, f.item(ledger, "entry#k"))

	require.NoError(t, b.CompleteTx(f.ctx, cb, []byte("ok"), ttl, ledgerWrites(t, ledger, "k", `{"account":"a1","amount_cents":250}`)))
	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusCompleted, attrS(it, dedup.AttrStatus))
	require.Equal(t, cb.Token, attrS(it, dedup.AttrToken))
	require.Equal(t, "250", attrN(f.item(ledger, "acct#a1"), "balance_cents"))
	// And after B completed, A still cannot touch it.
	after := f.snapshot("k")
	require.ErrorIs(t, a.Complete(f.ctx, ca, nil, ttl), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.Release(f.ctx, ca), dedup.ErrLeaseLost)
	require.Equal(t, after, f.snapshot("k"))
}

func (s *suite) testCompletedFenced(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.NoError(t, a.Complete(f.ctx, c, []byte("r"), ttl))
	before := f.snapshot("k")
	require.ErrorIs(t, a.Release(f.ctx, c), dedup.ErrLeaseLost, "a completed record must never be reopened")
	require.ErrorIs(t, a.Extend(f.ctx, &c, lease), dedup.ErrLeaseLost)
	require.NoError(t, a.CompleteTx(f.ctx, c, []byte("other"), ttl, nil), "a CompleteTx on our own completed record reads as our lost response, and changes nothing")
	require.Equal(t, before, f.snapshot("k"))
	f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
}

// testSwept: the TTL sweep deleted the record under a live claim; nothing
// conditioned on the token may bring it back.
func (s *suite) testSwept(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	_, err := f.db.DeleteItem(f.ctx, &dynamodb.DeleteItemInput{TableName: &f.table,
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}})
	require.NoError(t, err)
	require.ErrorIs(t, a.Extend(f.ctx, &c, lease), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.Release(f.ctx, c), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.Complete(f.ctx, c, nil, ttl), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.CompleteTx(f.ctx, c, nil, ttl, nil), dedup.ErrLeaseLost)
	require.Nil(t, f.item(f.table, "k"), "a fenced write resurrected a swept record")
}

// lostResponse wraps an API so that every write is sent twice and the caller
// sees the second response, as when a response is lost and the SDK retries.
type lostResponse struct {
	dedup.API
	mu    sync.Mutex
	calls map[string]int
}

func (l *lostResponse) count(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[op]++
}

func (l *lostResponse) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	l.count("PutItem")
	if _, err := l.API.PutItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return l.API.PutItem(ctx, in, o...)
}

func (l *lostResponse) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	l.count("UpdateItem")
	if _, err := l.API.UpdateItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return l.API.UpdateItem(ctx, in, o...)
}

func (l *lostResponse) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	l.count("TransactWriteItems")
	if _, err := l.API.TransactWriteItems(ctx, in, o...); err != nil {
		return nil, err
	}
	return l.API.TransactWriteItems(ctx, in, o...)
}

func (s *suite) testCompleteLostResponse(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	lr := &lostResponse{API: f.db}
	twice := dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now))
	require.NoError(t, twice.Complete(f.ctx, c, []byte("r"), ttl))
	require.Equal(t, 1, lr.calls["UpdateItem"])
	// A second Complete by the same claim (the caller's own retry) succeeds too.
	require.NoError(t, a.Complete(f.ctx, c, []byte("r"), ttl))
	d := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	require.Equal(t, []byte("r"), d.Record.Result)
}

func (s *suite) testClaimLostResponse(t *testing.T) {
	f := s.setup(t)
	lr := &lostResponse{API: f.db}
	twice := dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now))
	c := f.claim(twice, f.req("k", "body", lease, ttl), dedup.Won)
	require.Equal(t, c.Token, attrS(f.item(f.table, "k"), dedup.AttrToken))
	require.NoError(t, f.store().Complete(f.ctx, c, nil, ttl))
}

// ledgerWrites runs the ledger effect for one message and returns its writes.
func ledgerWrites(t *testing.T, table, key, body string) []types.TransactWriteItem {
	t.Helper()
	l := &builtin.Ledger{Table: table, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}
	out, err := l.Apply(context.Background(), effect.Input{Key: key, Message: effect.Message{ID: "m-" + key, Body: body, Group: "g1"}})
	require.NoError(t, err)
	require.NotEmpty(t, out.Writes)
	return out.Writes
}

func (s *suite) testCompleteTx(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.NoError(t, a.CompleteTx(f.ctx, c, []byte("done"), ttl, ledgerWrites(t, ledger, "k", `{"account":"a1","amount_cents":250,"seq":1}`)))
	acct := f.item(ledger, "acct#a1")
	require.Equal(t, "250", attrN(acct, "balance_cents"))
	require.Equal(t, "1", attrN(acct, "applied"))
	require.Equal(t, "1", attrN(acct, "last_seq"))
	require.NotNil(t, f.item(ledger, "entry#k"))
	it := f.item(f.table, "k")
	require.Equal(t, dedup.StatusCompleted, attrS(it, dedup.AttrStatus))
	d := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	require.Equal(t, []byte("done"), d.Record.Result)

	// A second message for the same account adds up.
	c2 := f.claim(a, f.req("k2", "body2", lease, ttl), dedup.Won)
	require.NoError(t, a.CompleteTx(f.ctx, c2, nil, ttl, ledgerWrites(t, ledger, "k2", `{"account":"a1","amount_cents":-50,"seq":2}`)))
	require.Equal(t, "200", attrN(f.item(ledger, "acct#a1"), "balance_cents"))
	require.Equal(t, "2", attrN(f.item(ledger, "acct#a1"), "applied"))
}

func (s *suite) testCompleteTxLostResponse(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a := f.store()
	for _, seq := range []string{"", `,"seq":9`} {
		key := "k" + seq
		body := `{"account":"a1","amount_cents":100` + seq + `}`
		c := f.claim(a, f.req(key, body, lease, ttl), dedup.Won)
		// The transport sends the same request twice (same ClientRequestToken
		// where the SDK sets one).
		lr := &lostResponse{API: f.db}
		twice := dedup.NewStore(lr, f.table, dedup.WithClock(f.clock.Now))
		require.NoError(t, twice.CompleteTx(f.ctx, c, []byte("r"), ttl, ledgerWrites(t, ledger, key, body)), "seq %q", seq)
		// The caller retries with a new request: our own COMPLETED record is
		// recognised, even when the effect's conditions would now fail too.
		require.NoError(t, a.CompleteTx(f.ctx, c, []byte("r"), ttl, ledgerWrites(t, ledger, key, body)), "seq %q", seq)
	}
	require.Equal(t, "200", attrN(f.item(ledger, "acct#a1"), "balance_cents"), "a retried commit applied the effect twice")
	require.Equal(t, "2", attrN(f.item(ledger, "acct#a1"), "applied"))
}

func (s *suite) testCompleteTxEffectCondition(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a := f.store()
	c1 := f.claim(a, f.req("k1", "b1", lease, ttl), dedup.Won)
	require.NoError(t, a.CompleteTx(f.ctx, c1, nil, ttl, ledgerWrites(t, ledger, "k1", `{"account":"a1","amount_cents":100,"seq":5}`)))
	acctBefore := Render(f.item(ledger, "acct#a1"))

	// seq 5 again (not increasing): the account update's own condition fails.
	c2 := f.claim(a, f.req("k2", "b2", lease, ttl), dedup.Won)
	before := f.snapshot("k2")
	err := a.CompleteTx(f.ctx, c2, []byte("r"), ttl, ledgerWrites(t, ledger, "k2", `{"account":"a1","amount_cents":100,"seq":5}`))
	var ece *dedup.EffectConditionError
	require.ErrorAs(t, err, &ece)
	require.NotErrorIs(t, err, dedup.ErrLeaseLost)
	require.Equal(t, 0, ece.Index, "the account update is the ledger's first write")
	require.Equal(t, "ConditionalCheckFailed", ece.Code)
	require.Equal(t, before, f.snapshot("k2"), "the record changed although the transaction was cancelled")
	require.Equal(t, acctBefore, Render(f.item(ledger, "acct#a1")), "the account changed although the transaction was cancelled")
	require.Nil(t, f.item(ledger, "entry#k2"))
	// The claim is intact: it can still be released.
	require.NoError(t, a.Release(f.ctx, c2))

	// The entry's own condition (one entry per dedup key) is the second write.
	_, err = f.db.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: &ledger, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "entry#k3"}}})
	require.NoError(t, err)
	c3 := f.claim(a, f.req("k3", "b3", lease, ttl), dedup.Won)
	err = a.CompleteTx(f.ctx, c3, nil, ttl, ledgerWrites(t, ledger, "k3", `{"account":"a1","amount_cents":100}`))
	require.ErrorAs(t, err, &ece)
	require.Equal(t, 1, ece.Index)
	require.Equal(t, acctBefore, Render(f.item(ledger, "acct#a1")))
}

func (s *suite) testCompleteTxLostBeatsEffect(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a, b := f.store(), f.store()
	c1 := f.claim(a, f.req("k1", "b1", lease, ttl), dedup.Won)
	require.NoError(t, a.CompleteTx(f.ctx, c1, nil, ttl, ledgerWrites(t, ledger, "k1", `{"account":"a1","amount_cents":100,"seq":5}`)))
	ca := f.claim(a, f.req("k2", "b2", time.Second, ttl), dedup.Won)
	f.clock.Advance(2 * time.Second)
	f.claim(b, f.req("k2", "b2", lease, ttl), dedup.Won)
	err := a.CompleteTx(f.ctx, ca, nil, ttl, ledgerWrites(t, ledger, "k2", `{"account":"a1","amount_cents":100,"seq":5}`))
	require.ErrorIs(t, err, dedup.ErrLeaseLost)
}

func (s *suite) testCompleteTxLimit(t *testing.T) {
	f := s.setup(t)
	ledger := Table(t, f.db)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	puts := func(n int) []types.TransactWriteItem {
		w := make([]types.TransactWriteItem, n)
		for i := range w {
			w[i] = types.TransactWriteItem{Put: &types.Put{TableName: &ledger, Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprint("item", i)}}}}
		}
		return w
	}
	// 100 writes and the record: 101 actions, refused before any request,
	// a verdict (ErrInvalid), not an error to retry.
	err := a.CompleteTx(f.ctx, c, nil, ttl, puts(100))
	require.ErrorIs(t, err, dedup.ErrTooLarge)
	require.ErrorIs(t, err, dedup.ErrInvalid)
	require.ErrorContains(t, err, "101 items")
	require.Nil(t, f.item(ledger, "item0"))
	_, err = f.db.TransactWriteItems(f.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(101)})
	require.Error(t, err, "the backend refuses 101 actions too")
	require.NoError(t, a.CompleteTx(f.ctx, c, nil, ttl, puts(99)))
	require.NotNil(t, f.item(ledger, "item98"))

	// An item over 400 KB: refused before any request. An update that
	// would grow one past it: DynamoDB's own ValidationException, also a
	// verdict.
	big := func(pk string, pad int) []types.TransactWriteItem {
		return []types.TransactWriteItem{{Put: &types.Put{TableName: &ledger, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", pad)}}}}}
	}
	c2 := f.claim(a, f.req("k2", "body", lease, ttl), dedup.Won)
	err = a.CompleteTx(f.ctx, c2, nil, ttl, big("huge", 400*1024))
	require.ErrorIs(t, err, dedup.ErrTooLarge)
	require.ErrorContains(t, err, "400 KB")
	require.NoError(t, a.CompleteTx(f.ctx, c2, nil, ttl, big("huge", 400*1024-10)), "pk+huge+pad = 400 KB - 1")
	c3 := f.claim(a, f.req("k3", "body", lease, ttl), dedup.Won)
	err = a.CompleteTx(f.ctx, c3, nil, ttl, []types.TransactWriteItem{{Update: &types.Update{TableName: &ledger,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "huge"}},
		UpdateExpression:          aws.String("SET more = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "yy"}}}}})
	require.ErrorIs(t, err, dedup.ErrInvalid)
	require.NotErrorIs(t, err, dedup.ErrTooLarge, "only DynamoDB knows an update's item")
	_, err = a.CommitOptimistic(f.ctx, f.req("k4", "body", lease, ttl), nil, big("huge2", 400*1024))
	require.ErrorIs(t, err, dedup.ErrTooLarge)
	require.Nil(t, f.item(f.table, "k4"), "nothing written")
}

// testLeaseUntil: a claim given the lease's end (on time.Now's clock) holds
// it until then, put on the store's clock; one whose end has passed is
// refused unwritten. (That the end stays where it is however late the
// claim comes is exact on virtual time only: the sqsevent and idempotency
// tests.)
func (s *suite) testLeaseUntil(t *testing.T) {
	f := s.setup(t)
	end := time.Now().Add(lease)
	r := f.req("k", "body", 0, ttl)
	r.LeaseUntil = end
	c := f.claim(f.store(), r, dedup.Won)
	require.WithinDuration(t, f.clock.Now().Add(time.Until(end)), c.LeaseUntil, time.Second)
	require.Equal(t, ms(c.LeaseUntil), attrN(f.item(f.table, "k"), dedup.AttrLeaseUntil))

	r = f.req("k2", "body", lease, ttl)
	r.LeaseUntil = time.Now()
	_, err := f.store().Claim(f.ctx, r)
	require.Error(t, err)
	require.Nil(t, f.item(f.table, "k2"))
}

func (s *suite) testResultLimit(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	before := f.snapshot("k")
	tooBig := make([]byte, dedup.MaxStoredBytes+1)
	require.ErrorIs(t, a.Complete(f.ctx, c, tooBig, ttl), dedup.ErrResultTooLarge)
	require.ErrorIs(t, a.CompleteTx(f.ctx, c, tooBig, ttl, nil), dedup.ErrResultTooLarge)
	require.Equal(t, before, f.snapshot("k"))
	full := make([]byte, dedup.MaxStoredBytes)
	for i := range full {
		full[i] = byte(i)
	}
	require.NoError(t, a.Complete(f.ctx, c, full, ttl))
	d := f.claim(f.store(), f.req("k", "body", lease, ttl), dedup.Duplicate)
	require.Equal(t, full, d.Record.Result, "the replayed result is not the stored one")

	// The largest record: the longest key, every attribute, the largest
	// result. It fits DynamoDB's item limit.
	long := strings.Repeat("k", dedup.MaxKeyBytes)
	r := f.req(long, "body", lease, ttl)
	r.MessageID, r.Group, r.Attempts = strings.Repeat("m", 128), strings.Repeat("g", 128), 1000
	c = f.claim(a, r, dedup.Won)
	require.NoError(t, a.Complete(f.ctx, c, full, ttl))
	d = f.claim(f.store(), f.req(long, "body", lease, ttl), dedup.Duplicate)
	require.Equal(t, full, d.Record.Result)
}

func (s *suite) testArguments(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	for _, r := range []dedup.ClaimRequest{
		{Key: "", PayloadSHA256: hash("b"), Lease: lease, TTL: ttl},
		{Key: "k", PayloadSHA256: hash("b"), Lease: 0, TTL: ttl},
		{Key: "k", PayloadSHA256: hash("b"), Lease: lease, TTL: 0},
		{Key: "k", PayloadSHA256: "", Lease: lease, TTL: ttl},
	} {
		_, err := a.Claim(f.ctx, r)
		require.Error(t, err, "%+v", r)
	}
	require.Nil(t, f.item(f.table, "k"))
	require.Error(t, a.Complete(f.ctx, dedup.Claim{Key: "k"}, nil, ttl))
	require.Error(t, a.Release(f.ctx, dedup.Claim{Key: "k"}))
	c := f.claim(a, f.req("k", "body", lease, ttl), dedup.Won)
	require.Error(t, a.Complete(f.ctx, c, nil, 0))
	require.Error(t, a.Extend(f.ctx, &c, 0))
}

func (s *suite) testLongKeys(t *testing.T) {
	f := s.setup(t)
	a := f.store()
	scope := dedup.Scope{Namespace: strings.Repeat("n", 4000), Queue: "orders.fifo", PerGroup: true}
	k1 := scope.Key(strings.Repeat("g", 3000), strings.Repeat("k", 10000))
	k2 := scope.Key(strings.Repeat("g", 3000), strings.Repeat("k", 10000)+"x")
	require.LessOrEqual(t, len(k1), dedup.MaxKeyBytes)
	f.claim(a, f.req(k1, "body", lease, ttl), dedup.Won)
	f.claim(a, f.req(k2, "body", lease, ttl), dedup.Won)
	f.claim(a, f.req(k1, "body", lease, ttl), dedup.Busy)
}

// testErrors: a failure that is not a condition is returned as an error,
// never read as won, and never as a lost lease.
func (s *suite) testErrors(t *testing.T) {
	f := s.setup(t)
	good := f.store()
	c := f.claim(good, f.req("k", "body", lease, ttl), dedup.Won)

	missing := dedup.NewStore(f.db, "no-such-table-"+f.table, dedup.WithClock(f.clock.Now))
	_, err := missing.Claim(f.ctx, f.req("k", "body", lease, ttl))
	require.Error(t, err)
	for _, err := range []error{
		missing.Complete(f.ctx, c, nil, ttl),
		missing.CompleteTx(f.ctx, c, nil, ttl, nil),
		missing.Extend(f.ctx, &c, lease),
		missing.Release(f.ctx, c),
	} {
		require.Error(t, err)
		require.NotErrorIs(t, err, dedup.ErrLeaseLost)
	}
	// A key DynamoDB rejects.
	_, err = good.Claim(f.ctx, f.req(strings.Repeat("k", dedup.MaxKeyBytes+1), "body", lease, ttl))
	require.Error(t, err)
	// An effect write DynamoDB rejects (two operations on the record) is an
	// error, neither lost lease nor effect condition; nothing is applied.
	bad := []types.TransactWriteItem{{Put: &types.Put{TableName: &f.table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k"}}}}}
	err = good.CompleteTx(f.ctx, c, nil, ttl, bad)
	require.Error(t, err)
	require.NotErrorIs(t, err, dedup.ErrLeaseLost)
	var ece *dedup.EffectConditionError
	require.NotErrorAs(t, err, &ece)
	require.Equal(t, dedup.StatusInProgress, attrS(f.item(f.table, "k"), dedup.AttrStatus))
}

func (s *suite) testCheck(t *testing.T) {
	ctx := context.Background()
	check := func(table string) error { return dedup.NewStore(s.db, table).Check(ctx) }
	require.NoError(t, check(Table(t, s.db)))

	err := check("no-such-table-" + testenv.Name("x"))
	require.ErrorContains(t, err, "does not exist")
	require.ErrorContains(t, err, "worker setup")
	require.ErrorContains(t, err, "terraform")

	for name, table := range map[string]string{
		"other key name": makeTable(t, s.db, "id", types.ScalarAttributeTypeS, false, dedup.AttrExpiresAt),
		"number key":     makeTable(t, s.db, "pk", types.ScalarAttributeTypeN, false, dedup.AttrExpiresAt),
		"range key":      makeTable(t, s.db, "pk", types.ScalarAttributeTypeS, true, dedup.AttrExpiresAt),
	} {
		err := check(table)
		require.Error(t, err, name)
		require.ErrorContains(t, err, `"pk"`, name)
		require.ErrorContains(t, err, "worker setup", name)
	}
	for name, table := range map[string]string{
		"TTL off":             makeTable(t, s.db, "pk", types.ScalarAttributeTypeS, false, ""),
		"TTL on another name": makeTable(t, s.db, "pk", types.ScalarAttributeTypeS, false, "ttl"),
	} {
		err := check(table)
		require.Error(t, err, name)
		require.ErrorContains(t, err, "expires_at", name)
		require.ErrorContains(t, err, "update-time-to-live", name)
	}
}

// testRace: many workers claim one key at once, round after round: exactly
// one wins each round, the others are told busy. Rounds alternate between a
// fresh key, a record whose lease ended and an expired completed record.
func (s *suite) testRace(t *testing.T) {
	f := s.setup(t)
	g, rounds := s.opts.RaceGoroutines, s.opts.RaceRounds
	stores := make([]*dedup.Store, g)
	for i := range stores {
		stores[i] = f.store()
	}
	for round := 0; round < rounds; round++ {
		key := fmt.Sprint("race-", round)
		switch round % 3 {
		case 1: // a claim whose lease ended
			f.claim(f.store(), f.req(key, "body", time.Millisecond, ttl), dedup.Won)
			f.clock.Advance(time.Second)
		case 2: // a completed record whose TTL passed
			st := f.store()
			c := f.claim(st, f.req(key, "body", lease, ttl), dedup.Won)
			require.NoError(t, st.Complete(f.ctx, c, nil, time.Second))
			f.clock.Advance(2 * time.Second)
		}
		start := make(chan struct{})
		results := make([]dedup.Claim, g)
		errs := make([]error, g)
		var wg sync.WaitGroup
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = stores[i].Claim(f.ctx, f.req(key, "body", lease, ttl))
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		var winner string
		for i := 0; i < g; i++ {
			require.NoError(t, errs[i], "round %d", round)
			switch results[i].Outcome {
			case dedup.Won:
				won++
				winner = results[i].Token
			case dedup.Busy:
			default:
				t.Fatalf("round %d: outcome %s", round, results[i].Outcome)
			}
		}
		require.Equal(t, 1, won, "round %d: %d winners", round, won)
		require.Equal(t, winner, attrS(f.item(f.table, key), dedup.AttrToken), "round %d", round)
	}
}

// testZombieRealClock: A claims with a short lease and stalls; B takes over
// after it ends (real time); A's Complete and CompleteTx fail with
// ErrLeaseLost and apply nothing; B's succeed, once.
func (s *suite) testZombieRealClock(t *testing.T) {
	ctx := context.Background()
	table, ledger := Table(t, s.db), Table(t, s.db)
	a, b := dedup.NewStore(s.db, table), dedup.NewStore(s.db, table)
	body := `{"account":"z1","amount_cents":700,"seq":1}`
	req := dedup.ClaimRequest{Key: "zombie", PayloadSHA256: hash(body), Lease: 300 * time.Millisecond, TTL: time.Hour}
	ca, err := a.Claim(ctx, req)
	require.NoError(t, err)
	require.Equal(t, dedup.Won, ca.Outcome)

	// B is told busy while A's lease lasts (unless the machine was slow
	// enough for it to have ended already), and wins once it has ended.
	req.Lease = time.Minute
	cb, err := b.Claim(ctx, req)
	require.NoError(t, err)
	if cb.Outcome == dedup.Busy {
		require.LessOrEqual(t, cb.Remaining, 300*time.Millisecond)
		time.Sleep(cb.Remaining + 50*time.Millisecond)
		cb, err = b.Claim(ctx, req)
		require.NoError(t, err)
	}
	require.Equal(t, dedup.Won, cb.Outcome)
	require.False(t, time.Now().Before(ca.LeaseUntil), "B won during A's lease")

	f := &fixture{t: t, db: s.db, table: table, ctx: ctx}
	before := f.snapshot("zombie")
	require.ErrorIs(t, a.Complete(ctx, ca, []byte("zombie"), time.Hour), dedup.ErrLeaseLost)
	require.ErrorIs(t, a.CompleteTx(ctx, ca, []byte("zombie"), time.Hour, ledgerWrites(t, ledger, "zombie", body)), dedup.ErrLeaseLost)
	require.Equal(t, before, f.snapshot("zombie"))
	require.Nil(t, f.item(ledger, "acct#z1"))

	require.NoError(t, b.CompleteTx(ctx, cb, []byte("ok"), time.Hour, ledgerWrites(t, ledger, "zombie", body)))
	require.Equal(t, "700", attrN(f.item(ledger, "acct#z1"), "balance_cents"))
	require.ErrorIs(t, a.CompleteTx(ctx, ca, nil, time.Hour, ledgerWrites(t, ledger, "zombie", body)), dedup.ErrLeaseLost)
	require.Equal(t, "700", attrN(f.item(ledger, "acct#z1"), "balance_cents"))
	require.Equal(t, "1", attrN(f.item(ledger, "acct#z1"), "applied"))
}
