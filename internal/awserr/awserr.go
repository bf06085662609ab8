// Package awserr classifies AWS errors for start-up messages.
package awserr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

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
