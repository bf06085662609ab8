package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fixHint names the two supported ways to make a correct table.
const fixHint = "create it with `worker setup --table %s` or the infra/terraform/modules/dedup-table module"

// Check verifies at start-up that the table exists, that its key schema is
// exactly pk (S) and that TTL is enabled on expires_at. Its errors name the fix.
func (s *Store) Check(ctx context.Context) error {
	dt, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.table})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return fmt.Errorf("dedup table %q does not exist: "+fixHint, s.table, s.table)
		}
		return fmt.Errorf("cannot describe dedup table %q: %w", s.table, err)
	}
	t := dt.Table
	if len(t.KeySchema) != 1 || aws.ToString(t.KeySchema[0].AttributeName) != AttrPK || t.KeySchema[0].KeyType != types.KeyTypeHash {
		return fmt.Errorf("dedup table %q must have exactly one key, hash key %q; "+fixHint, s.table, AttrPK, s.table)
	}
	for _, ad := range t.AttributeDefinitions {
		if aws.ToString(ad.AttributeName) == AttrPK && ad.AttributeType != types.ScalarAttributeTypeS {
			return fmt.Errorf("dedup table %q: key %q must be a string (S), not %s; "+fixHint, s.table, AttrPK, ad.AttributeType, s.table)
		}
	}
	ttl, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &s.table})
	if err != nil {
		return fmt.Errorf("cannot describe TTL of dedup table %q: %w", s.table, err)
	}
	d := ttl.TimeToLiveDescription
	if d == nil || aws.ToString(d.AttributeName) != AttrExpiresAt ||
		(d.TimeToLiveStatus != types.TimeToLiveStatusEnabled && d.TimeToLiveStatus != types.TimeToLiveStatusEnabling) {
		return fmt.Errorf("dedup table %q: TTL must be enabled on %q (aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=true,AttributeName=%s), or "+fixHint,
			s.table, AttrExpiresAt, s.table, AttrExpiresAt, s.table)
	}
	return nil
}
