package memdynamo

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrUnsupported is wrapped by every error about a request that DynamoDB
// would accept but this implementation does not model. It is never a reason
// to guess: the request fails.
var ErrUnsupported = errors.New("memdynamo: not supported")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// validation is DynamoDB's ValidationException, which the SDK surfaces as a
// generic API error with that code.
func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func notFound() error {
	return &types.ResourceNotFoundException{Message: aws.String("Cannot do operations on a non-existent table")}
}

func conditionFailed(old item, allOld bool) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if allOld && old != nil {
		e.Item = copyItem(old)
	}
	return e
}
