package builtin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/outbox"
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
		return e, fmt.Errorf("ledger body is not the expected JSON object: %w", err)
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
//
// With Confirm (a queue URL) set, each entry also sends a confirmation
// through the worker's outbox, committed with the entry: the same entry
// (account, amount_cents, seq) plus "confirms" (the dedup key), in message
// group account, with the ID <dedup key>/confirmed. A second worker with
// the ledger effect on that queue applies it to its own table exactly once,
// in the order the first committed: a chain of exactly-once effects.
type Ledger struct {
	Table   string
	Confirm string
	Now     func() time.Time
}

// confirmation is the body of a ledger entry's confirmation.
type confirmation struct {
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	Seq         *int64 `json:"seq,omitempty"`
	Confirms    string `json:"confirms"`
}

// WritesOnly declares that the ledger's whole effect is its writes.
func (*Ledger) WritesOnly() {}

// Carrier says that the entry (write 1: a Put of "entry#<dedup key>",
// conditioned on its absence) can carry the dedup record: in carried mode
// a ledger message costs the account's update and the entry, no record.
func (*Ledger) Carrier() int { return 1 }

// Apply returns the ledger's writes; it has no other effect.
func (l *Ledger) Apply(_ context.Context, in effect.Input) (effect.Output, error) {
	e, err := ParseLedgerEntry(in.Message.Body)
	if err != nil {
		return effect.Output{}, effect.Permanent(err)
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
	out := effect.Output{Writes: []types.TransactWriteItem{
		{Update: acct},
		{Put: &types.Put{
			TableName:           aws.String(l.Table),
			Item:                entry,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}}
	if l.Confirm != "" {
		body, err := json.Marshal(confirmation{Account: e.Account, AmountCents: *e.AmountCents, Seq: e.Seq, Confirms: in.Key})
		if err != nil {
			return effect.Output{}, err
		}
		c := effect.Outgoing{QueueURL: l.Confirm, Group: e.Account, Body: string(body), ID: confirmationID(in.Key)}
		if outbox.IsTopicARN(l.Confirm) {
			c.QueueURL, c.TopicARN = "", l.Confirm
		}
		out.Send = []effect.Outgoing{c}
	}
	return out, nil
}

// confirmationID is the message ID of the confirmation of the entry keyed
// key: an ID SQS takes (outbox.ValidID), whatever the key.
func confirmationID(key string) string {
	id := key + "/confirmed"
	if outbox.ValidID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:]) + "/confirmed"
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Noop does nothing and succeeds: for benchmarks and dry runs.
type Noop struct{}

// WritesOnly: Noop writes nothing else either.
func (Noop) WritesOnly() {}

// Apply succeeds.
func (Noop) Apply(context.Context, effect.Input) (effect.Output, error) { return effect.Output{}, nil }
