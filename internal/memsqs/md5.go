package memsqs

import (
	"crypto/md5" //nolint:gosec // SQS's own checksum of bodies and attributes
	"encoding/binary"
	"encoding/hex"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func md5Hex(b []byte) string {
	sum := md5.Sum(b) //nolint:gosec // SQS's checksum, not security
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is SQS's MD5OfMessageAttributes: for each attribute in name
// order, the length-prefixed name, data type, a transport byte (1 string,
// 2 binary) and the length-prefixed value.
func md5OfAttributes(attrs map[string]types.MessageAttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf []byte
	put := func(b []byte) {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	for _, n := range names {
		v := attrs[n]
		put([]byte(n))
		put([]byte(derefS(v.DataType)))
		if v.BinaryValue != nil {
			buf = append(buf, 2)
			put(v.BinaryValue)
		} else {
			buf = append(buf, 1)
			put([]byte(derefS(v.StringValue)))
		}
	}
	return md5Hex(buf)
}

func derefS(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
