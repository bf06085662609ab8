package dedup

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/ddblimit"
)

// ErrTooLarge is matched (errors.Is) by the error of a commit that cannot
// fit one DynamoDB TransactWriteItems: more than 100 actions (the record
// and the writes), an item over 400 KB, or over 4 MB in all. It is found
// before any request, and it is ErrInvalid too: no retry can fix it.
var ErrTooLarge = errors.New("dedup: the commit does not fit one DynamoDB transaction")

// tooLarge is an ErrTooLarge that says which limit the commit of key
// passes, and by how much.
type tooLarge struct {
	key, msg string
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("dedup: the commit of %q does not fit one DynamoDB transaction: %s", e.key, e.msg)
}

func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge || target == ErrInvalid }

// checkSize checks a commit's transaction (the record first, then the
// writes) against DynamoDB's documented limits, counting what can be
// counted before the request: the actions, each put's item, and a lower
// bound of the whole (an update's item is only known to DynamoDB, whose
// ValidationException is ErrInvalid too).
func checkSize(key string, items []types.TransactWriteItem) error {
	switch over, i, n := ddblimit.Check(items); over {
	case ddblimit.Actions:
		return &tooLarge{key, fmt.Sprintf("%d items (the dedup record and %d writes); a TransactWriteItems takes at most %d",
			n, n-1, ddblimit.TransactItems)}
	case ddblimit.Item:
		what := fmt.Sprintf("write %d puts an item", i-1)
		if i == 0 {
			what = "the dedup record is"
		}
		return &tooLarge{key, fmt.Sprintf("%s of %d bytes; a DynamoDB item takes at most 400 KB (%d bytes), attribute names included",
			what, n, ddblimit.ItemBytes)}
	case ddblimit.Bytes:
		return &tooLarge{key, fmt.Sprintf("%d bytes of items; a TransactWriteItems takes at most 4 MB (%d bytes)", n, ddblimit.TransactBytes)}
	}
	return nil
}
