// Package worker is the stock command line of exactly (run, lambda, setup,
// send, redrive, healthcheck, ...) for binaries of your own: pass your
// effects to Main by name, and --effect picks one of them or of the
// built-in ones (noop, ledger, http). The worker binary (cmd/worker) is
// Main with no effects of its own. To run the worker inside a service of
// your own instead, use package exactly.
package worker

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/cli"
)

// Version is set at build time with
// -ldflags "-X github.com/exactlyonce/exactly/worker.Version=...".
var Version = "dev"

// Exit codes of Main.
const (
	ExitOK     = 0
	ExitError  = 1
	ExitConfig = 2 // bad configuration: fix the named setting
)

// DynamoDB is the part of the DynamoDB client effects may use.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Env is what a Factory gets to build its effect at start-up (run, or a
// Lambda function's cold start).
type Env struct {
	// DynamoDB is the worker's DynamoDB client.
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
	HTTPClient *http.Client
	// Log is the worker's logger.
	Log *slog.Logger
	// Lookup reads the process environment, for an effect's own settings.
	Lookup func(string) (string, bool)
}

// Factory builds an effect at start-up. An error stops the worker with
// ExitConfig, so it should name the setting at fault.
type Factory func(Env) (effect.Effect, error)

// Effects are a binary's own effects by name, the value of --effect
// (WORKER_EFFECT) that selects each. The names of the built-in effects
// (noop, ledger, http) are taken.
type Effects map[string]Factory

// Main runs the command line on args (without the program name) with the
// built-in effects and effects, and returns the process exit code. It reads
// the process environment (WORKER_*, the AWS SDK's) and handles SIGINT and
// SIGTERM. A name of effects that is empty, a built-in's, or has a nil
// Factory makes it return ExitConfig.
func Main(args []string, effects Effects) int {
	cli.Version = Version
	return cli.Main(args, cliEffects(effects))
}

// cliEffects hands effects to the command line, each given an Env made of
// the command line's.
func cliEffects(effects Effects) cli.Effects {
	own := make(cli.Effects, len(effects))
	for name, f := range effects {
		if f == nil {
			own[name] = nil
			continue
		}
		own[name] = func(e cli.Env) (effect.Effect, error) {
			return f(Env{DynamoDB: e.DynamoDB, AWS: e.AWS, HTTPClient: e.HTTPClient, Log: e.Log, Lookup: e.Lookup})
		}
	}
	return own
}
