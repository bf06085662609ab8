package exactly

import (
	"errors"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// TestConfigErrorWrapsItsCause: a ConfigError made from an error keeps it,
// for errors.Is and errors.As, with the text unchanged; one made from a
// message alone has no cause.
func TestConfigErrorWrapsItsCause(t *testing.T) {
	t.Parallel()
	cause := errors.New("bad pointer")
	err := configErr("KeySource", ": %w", cause)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "exactly: Config.KeySource: bad pointer", err.Error())

	require.NoError(t, errors.Unwrap(configErr("Queues", " is empty")))

	apiErr := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}
	err = denied(apiErr, "dynamodb:DescribeTable", "dedup")
	require.ErrorAs(t, err, &ce)
	var got smithy.APIError
	require.ErrorAs(t, err, &got, "the AWS error stays reachable")
	require.Equal(t, "AccessDeniedException", got.ErrorCode())
	require.Contains(t, err.Error(), "dynamodb:DescribeTable")
}
