package memsqs

// ValidAttributeName reports whether k is a valid message attribute name
// (and, past its base, type): up to 256 of A-Z a-z 0-9 _ - ., no leading,
// trailing or successive periods, not AWS. or Amazon. in any case. SNS
// holds its message attributes to the same rule (internal/memsns).
func ValidAttributeName(k string) bool { return validAttrName(k) }

// ValidMessageID reports whether id is a valid MessageGroupId or
// MessageDeduplicationId: 1 to 128 printable ASCII characters but space.
// SNS FIFO topics take the same (internal/memsns).
func ValidMessageID(id string) bool { return validMessageID(id) }
