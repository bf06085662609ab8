package dedup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// MaxGroupItems is how many items one TransactWriteItems holds, and
// MaxGroupBytes its aggregate size.
const (
	MaxGroupItems = ddblimit.TransactItems
	MaxGroupBytes = ddblimit.TransactBytes
)

// ErrNotAlone is wrapped by a group commit's result when the shared
// transaction failed without a verdict on this commit: another commit's
// condition failed, DynamoDB refused the request as a whole (two commits
// writing one item, the size limit), or no answer came. Nothing of this
// commit was applied, unless no answer came; either way it must be tried
// again alone, at once, with the same token, which then tells.
var ErrNotAlone = errors.New("dedup: the group's transaction gave no verdict on this commit; try it alone")

// GroupEntry is one optimistic commit of a CommitGroup: CommitOptimistic's
// arguments.
type GroupEntry struct {
	Req    ClaimRequest // Req.Token: the token its retries will pass
	Result []byte
	Writes []types.TransactWriteItem
}

// GroupResult is one entry's outcome, as CommitOptimistic would return it,
// or an error wrapping ErrNotAlone.
type GroupResult struct {
	Claim Claim
	Err   error
}

// CommitGroup makes several optimistic commits (of different keys) in one
// TransactWriteItems: all of them commit, or none does. When it is
// cancelled, each entry gets the verdict its own items' cancellation
// reasons hold (a duplicate, a conflict, a live claim, its writes'
// condition, an invalid write), and every entry without one an ErrNotAlone.
// Entries that are invalid before any request (an oversized result) get
// their error and stay out. One entry alone is CommitOptimistic.
func (s *Store) CommitGroup(ctx context.Context, entries []GroupEntry) []GroupResult {
	out := make([]GroupResult, len(entries))
	var ready []optimistic
	var at []int // index in entries of each ready commit
	n, size := 0, 0
	for i, e := range entries {
		o, err := s.prepareOptimistic(e.Req, e.Result, e.Writes)
		if err != nil {
			out[i].Err = err
			continue
		}
		ready = append(ready, o)
		at = append(at, i)
		n += len(o.items)
		size += ddblimit.TransactionBytes(o.items)
	}
	switch {
	case len(ready) == 0:
		return out
	case len(ready) == 1 || n > MaxGroupItems || size > MaxGroupBytes:
		for j, o := range ready {
			e := entries[at[j]]
			out[at[j]].Claim, out[at[j]].Err = s.CommitOptimistic(ctx, o.req, e.Result, e.Writes)
		}
		return out
	}
	items := make([]types.TransactWriteItem, 0, n)
	for _, o := range ready {
		items = append(items, o.items...)
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
		for j, o := range ready {
			out[at[j]].Claim = o.won
		}
		return out
	case !errors.As(err, &tce) || len(tce.CancellationReasons) != n:
		// No answer, or one on the request as a whole: nobody's verdict.
		for j := range ready {
			out[at[j]].Err = fmt.Errorf("%w (%d commits in one transaction: %v)", ErrNotAlone, len(ready), err) //nolint:errorlint // the cause is told, not wrapped: a caller classifies ErrNotAlone alone
		}
		return out
	}
	off := 0
	for j, o := range ready {
		reasons := tce.CancellationReasons[off : off+len(o.items)]
		off += len(o.items)
		old, verdict := reasonsVerdict(o.req.Key, reasons, err)
		switch {
		case old != nil:
			out[at[j]].Claim, out[at[j]].Err = o.judge(old)
		case verdict != nil:
			out[at[j]].Err = verdict
		default:
			out[at[j]].Err = fmt.Errorf("%w (cancellation reasons %s of %d commits in one transaction)", ErrNotAlone, reasonCodes(reasons), len(ready))
		}
	}
	return out
}

// Size is e's commit as a transaction counts it: its items and a lower
// bound of their bytes. err is the error the commit has on its own
// (ErrTooLarge, ErrResultTooLarge...): it cannot join a group.
func (s *Store) Size(e GroupEntry) (items, bytes int, err error) {
	o, err := s.prepareOptimistic(e.Req, e.Result, e.Writes)
	if err != nil {
		return 0, 0, err
	}
	return len(o.items), ddblimit.TransactionBytes(o.items), nil
}

// ItemIDs names the items a commit writes: its record and its writes,
// table and key. A Put names its item by its pk attribute, when it has one
// (the dedup table's key, and the ledger's); a Put keyed otherwise is not
// named, and two commits that put one such item in one transaction are
// refused by DynamoDB as a whole (then tried alone).
func (s *Store) ItemIDs(e GroupEntry) []string {
	ids := []string{s.table + "\x00" + renderKey(keyOf(e.Req.Key))}
	for _, w := range e.Writes {
		var table *string
		var key map[string]types.AttributeValue
		switch {
		case w.Update != nil:
			table, key = w.Update.TableName, w.Update.Key
		case w.Delete != nil:
			table, key = w.Delete.TableName, w.Delete.Key
		case w.ConditionCheck != nil:
			table, key = w.ConditionCheck.TableName, w.ConditionCheck.Key
		case w.Put != nil:
			if pk, ok := w.Put.Item[AttrPK]; ok {
				table, key = w.Put.TableName, map[string]types.AttributeValue{AttrPK: pk}
			}
		}
		if key != nil {
			ids = append(ids, aws.ToString(table)+"\x00"+renderKey(key))
		}
	}
	return ids
}

// renderKey renders a key's attributes canonically.
func renderKey(key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for k := range key {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		switch v := key[k].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("=S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("=N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("=B:" + hex.EncodeToString(v.Value))
		default:
			b.WriteString(fmt.Sprintf("=%T", v))
		}
		b.WriteByte(0)
	}
	return b.String()
}
