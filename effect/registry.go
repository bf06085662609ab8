package effect

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoDB is the part of the DynamoDB client effects may use.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Env is what a factory gets to build an effect.
type Env struct {
	DynamoDB DynamoDB
	// AWS is the worker's own AWS configuration (region, credentials,
	// endpoints, retryer, from the SDK's standard sources): build the clients
	// of other services from it, as in sns.NewFromConfig(env.AWS). Under
	// worker run their calls are counted in exactly_aws_requests_total too.
	AWS aws.Config
	// HTTPClient is a client with timeouts (30 s per request, bounded dial,
	// TLS handshake and response headers) and a connection pool sized to the
	// worker's concurrency; share it rather than using http.DefaultClient,
	// which has none. The effect's context still bounds each call.
	HTTPClient  *http.Client
	Log         *slog.Logger
	LedgerTable string // --ledger-table
	// LedgerConfirm is the queue URL the ledger effect sends its
	// confirmations to through the outbox (--ledger-confirm-queue); empty:
	// none.
	LedgerConfirm string
	HTTPURL       string // --http-url
	// Lookup reads the process environment, for an effect's own settings.
	Lookup func(string) (string, bool)
}

// Factory builds an effect at start-up. An error stops the worker with exit
// code 2, so it should name the setting at fault.
type Factory func(Env) (Effect, error)

var (
	mu       sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes an effect available to --effect under name. It panics if the
// name is taken: registration happens in init or main, where that is a bug.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("effect: %q registered twice", name))
	}
	registry[name] = f
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered effects, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() {
	Register("noop", func(Env) (Effect, error) { return Noop{}, nil })
	Register("ledger", func(env Env) (Effect, error) {
		if env.LedgerTable == "" {
			return nil, fmt.Errorf("--ledger-table (WORKER_LEDGER_TABLE) is required by the ledger effect")
		}
		return &Ledger{Table: env.LedgerTable, Confirm: env.LedgerConfirm}, nil
	})
}

// Noop does nothing and succeeds: for benchmarks and dry runs.
type Noop struct{}

// WritesOnly reports that Noop writes nothing else either.
func (Noop) WritesOnly() {}

// Apply succeeds.
func (Noop) Apply(context.Context, Input) (Output, error) { return Output{}, nil }
