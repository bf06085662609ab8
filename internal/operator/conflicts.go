package operator

import (
	"context"
	"fmt"
	"sort"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/dedup"
)

// Conflicts reads one page of a Scan of the table (at most limit items
// read, 0: DynamoDB's 1 MB page) from start (nil: the beginning) and
// returns its records that met a conflict (a delivery of another payload
// under their completed key: dedup.Store.NoteConflict) and have not
// expired, latest conflict first. Each carries its own payload hash and
// the first and latest conflicting ones. The whole list costs a scan of
// the table, as Stuck's does.
func Conflicts(ctx context.Context, db RecordsDB, table string, now time.Time, start map[string]ddbtypes.AttributeValue, limit int32) (StuckPage, error) {
	p, err := scanRecords(ctx, db, table, start, limit, "attribute_exists(#cn) AND #exp >= :now_s",
		map[string]string{"#cn": dedup.AttrConflicts, "#exp": dedup.AttrExpiresAt},
		map[string]ddbtypes.AttributeValue{":now_s": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(now.Unix())}})
	SortConflicts(p.Records)
	return p, err
}

// SortConflicts orders records latest conflict first.
func SortConflicts(recs []*dedup.Record) {
	at := func(r *dedup.Record) time.Time {
		if r.LastConflict == nil {
			return time.Time{}
		}
		return r.LastConflict.At
	}
	sort.SliceStable(recs, func(i, j int) bool { return at(recs[i]).After(at(recs[j])) })
}
