package effect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LedgerEntry is the body the ledger effect expects:
// {"account":"a1","amount_cents":250,"seq":7}.
type LedgerEntry struct {
	Account     string `json:"account"`
	AmountCents *int64 `json:"amount_cents"`
	Seq         *int64 `json:"seq,omitempty"`
}

// ParseLedgerEntry validates a ledger body.
func ParseLedgerEntry(body string) (LedgerEntry, error) {
	var e LedgerEntry
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("ledger body is not the expected JSON object: %v", err)
	}
	switch {
	case e.Account == "":
		return e, errors.New(`ledger body has no "account"`)
	case e.AmountCents == nil:
		return e, errors.New(`ledger body has no "amount_cents"`)
	case e.Seq != nil && *e.Seq < 0:
		return e, errors.New(`ledger body has a negative "seq"`)
	}
	return e, nil
}

// Ledger is the demo of a non-idempotent effect made exactly-once: it adds
// amount_cents to item pk="acct#<account>" (balance_cents, applied, last_seq)
// and writes item pk="entry#<dedup key>". With seq, the account update is
// conditioned on last_seq < seq. Its writes commit in one transaction with the
// dedup record, so it cannot be applied twice even after a lost lease.
type Ledger struct {
	Table string
	Now   func() time.Time
}

// WritesOnly declares that the ledger's whole effect is its writes.
func (*Ledger) WritesOnly() {}

// Apply returns the ledger's writes; it has no other effect.
func (l *Ledger) Apply(_ context.Context, in Input) (Output, error) {
	e, err := ParseLedgerEntry(in.Message.Body)
	if err != nil {
		return Output{}, Permanent(err)
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	amt := n(*e.AmountCents)
	acct := &types.Update{
		TableName: aws.String(l.Table),
		Key:       map[string]types.AttributeValue{"pk": s("acct#" + e.Account)},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":amt": amt, ":one": n(1),
		},
	}
	if e.Seq != nil {
		acct.UpdateExpression = aws.String("ADD balance_cents :amt, applied :one SET last_seq = :seq")
		acct.ConditionExpression = aws.String("attribute_not_exists(last_seq) OR last_seq < :seq")
		acct.ExpressionAttributeValues[":seq"] = n(*e.Seq)
	} else {
		acct.UpdateExpression = aws.String("ADD balance_cents :amt, applied :one")
	}
	entry := map[string]types.AttributeValue{
		"pk":           s("entry#" + in.Key),
		"account":      s(e.Account),
		"amount_cents": amt,
		"message_id":   s(in.Message.ID),
		"applied_at":   n(now().UnixMilli()),
	}
	if in.Message.Group != "" {
		entry["group"] = s(in.Message.Group)
	}
	if e.Seq != nil {
		entry["seq"] = n(*e.Seq)
	}
	return Output{Writes: []types.TransactWriteItem{
		{Update: acct},
		{Put: &types.Put{
			TableName:           aws.String(l.Table),
			Item:                entry,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}}, nil
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
