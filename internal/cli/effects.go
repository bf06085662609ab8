package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

// DynamoDB is the part of the DynamoDB client effects may use.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Env is what a factory gets to build an effect: worker.Env's fields, and
// the flags of the built-in effects.
type Env struct {
	DynamoDB   DynamoDB
	AWS        aws.Config
	HTTPClient *http.Client
	Log        *slog.Logger
	Lookup     func(string) (string, bool)

	LedgerTable   string // --ledger-table
	LedgerConfirm string // --ledger-confirm-queue
	HTTPURL       string // --http-url
}

// Factory builds an effect at start-up; its error stops the worker with
// ExitConfig.
type Factory func(Env) (effect.Effect, error)

// Effects are the effects --effect may name, by name.
type Effects map[string]Factory

// builtins are the effects every worker binary has.
func builtins() Effects {
	return Effects{
		"noop": func(Env) (effect.Effect, error) { return builtin.Noop{}, nil },
		"ledger": func(env Env) (effect.Effect, error) {
			if env.LedgerTable == "" {
				return nil, errors.New("--ledger-table (WORKER_LEDGER_TABLE) is required by the ledger effect")
			}
			return &builtin.Ledger{Table: env.LedgerTable, Confirm: env.LedgerConfirm}, nil
		},
		"http": func(env Env) (effect.Effect, error) {
			if env.HTTPURL == "" {
				return nil, errors.New("--http-url (WORKER_HTTP_URL) is required by the http effect")
			}
			u, err := url.Parse(env.HTTPURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("--http-url (WORKER_HTTP_URL) %q: want an http:// or https:// URL", env.HTTPURL)
			}
			c := env.HTTPClient
			if c == nil {
				c = &http.Client{Timeout: effectHTTPTimeout}
			}
			return &builtin.HTTP{URL: env.HTTPURL, Client: c}, nil
		},
	}
}

// withBuiltins returns the built-in effects and own, which may not reuse a
// built-in name or leave a factory nil.
func withBuiltins(own Effects) (Effects, error) {
	all := builtins()
	for _, name := range slices.Sorted(maps.Keys(own)) {
		switch {
		case name == "":
			return nil, errors.New("an effect passed to worker.Main has an empty name")
		case own[name] == nil:
			return nil, fmt.Errorf("the effect %q passed to worker.Main has a nil factory", name)
		case all[name] != nil:
			return nil, fmt.Errorf("the effect %q passed to worker.Main is a built-in one: give yours another name", name)
		}
		all[name] = own[name]
	}
	return all, nil
}

// names lists the effects, sorted.
func (e Effects) names() []string { return slices.Sorted(maps.Keys(e)) }
