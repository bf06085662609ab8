// Package awserr classifies AWS errors: for start-up messages, and the
// cases the library's callers retry.
package awserr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TransactionConflict reports whether err is DynamoDB's answer to a write
// that met a concurrent transaction on one of its items: a transaction
// cancelled for TransactionConflict, or a single write's
// TransactionConflictException. The SDK does not retry either; trying again
// at once usually succeeds.
func TransactionConflict(err error) bool {
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return true
			}
		}
	}
	return false
}

// Denied says, for a credential or permission error, what the role or the
// credentials lack, naming the action and resource: "permission denied: the
// worker's role needs sqs:SendMessage on q (...)". ok is false for any
// other error.
func Denied(err error, action, resource string) (msg string, ok bool) {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return "", false
	}
	switch code := ae.ErrorCode(); {
	case strings.Contains(code, "AccessDenied"):
		return fmt.Sprintf("permission denied: the worker's role needs %s on %s (%s)", action, resource, ae.ErrorMessage()), true
	case code == "UnrecognizedClientException", code == "InvalidClientTokenId", code == "ExpiredToken",
		code == "ExpiredTokenException", code == "InvalidSignatureException", code == "SignatureDoesNotMatch":
		return fmt.Sprintf("AWS credentials rejected calling %s on %s: %s (%s)", action, resource, code, ae.ErrorMessage()), true
	}
	return "", false
}

// Code is err's AWS error code without the query protocol's
// "AWS.SimpleQueueService." prefix (some endpoints send it), "" when err is
// not an API error. The SDK's typed SQS errors give the short code.
func Code(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	return TrimCode(ae.ErrorCode())
}

// TrimCode drops the query protocol's "AWS.SimpleQueueService." prefix
// from an SQS error code (a batch entry's, say).
func TrimCode(code string) string { return strings.TrimPrefix(code, "AWS.SimpleQueueService.") }
