// Package exactly turns SQS's at-least-once delivery into exactly-once
// effects: a Worker long-polls SQS queues (FIFO and standard), keeps each
// message group in order while running many groups in parallel, and runs
// each logical message's effect once, whatever is redelivered, by claiming
// its dedup key in a DynamoDB ledger (conditional writes, a TTL, leases with
// fencing tokens) and deleting the message only after the effect and its
// record have committed. A LambdaHandler does the same for the SQS events
// of a Lambda event source mapping.
//
// Build either from a Config: the SQS and DynamoDB clients, the queues, the
// dedup table and the effect (package effect); every other setting has a
// documented default. New and NewLambdaHandler check everything the Config
// names before anything runs and report each problem as a *ConfigError.
// The package reads no environment and no flags, opens no listener and
// registers no metrics unless given a prometheus.Registerer: the worker
// command (cmd/worker) is one client of it.
//
// An effect whose whole effect is DynamoDB writes returns them
// (effect.Output.Writes): they commit in one transaction with the dedup
// record, so they are applied exactly once whatever fails. Any other effect
// (an HTTP call) gets the dedup key to pass downstream as its idempotency
// key. README.md states the guarantees and the failure windows precisely.
//
// Package idempotency offers the same ledger for any function and at an
// HTTP API's edge.
package exactly
