package outbox

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/exactlyonce/exactly/internal/outboxschema"
)

// CreateTableInput describes the outbox table named table, as `worker setup
// --outbox-table` creates it and the Terraform module outbox-table declares
// it: on demand, a stream of keys, and the sparse index the relay sweeps.
// Turn on TTL on its "ttl" attribute separately (UpdateTimeToLive), so that
// published messages expire. Its attribute names are the outbox's format,
// not part of this package's API.
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	return outboxschema.CreateTableInput(table)
}
