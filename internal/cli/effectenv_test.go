package cli

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/builtin"
)

func testClients() *clients {
	noop := func(*middleware.Stack) error { return nil }
	opts := make([]func(*middleware.Stack) error, 1, 4) // room to append in place
	opts[0] = noop
	return &clients{cfg: aws.Config{Region: "eu-west-1", APIOptions: opts}}
}

// TestEffectEnvCarriesTheAWSConfigAndAnHTTPClient: what buildEffect hands
// every factory (run and lambda both call it): the worker's AWS
// configuration, and an HTTP client with timeouts and a pool sized to the
// concurrency.
func TestEffectEnvCarriesTheAWSConfigAndAnHTTPClient(t *testing.T) {
	t.Parallel()
	cl := testClients()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := effectEnv(settings{concurrency: 48, ledgerTable: "l", httpURL: "http://h"}, cl, log, env("EMAIL_FROM", "a@b"))

	require.Equal(t, "eu-west-1", env.AWS.Region, "the worker's AWS config")
	require.Len(t, env.AWS.APIOptions, 1, "with the worker's middleware (request counting)")
	env.AWS.APIOptions = append(env.AWS.APIOptions, func(*middleware.Stack) error { return nil })
	require.Nil(t, cl.cfg.APIOptions[:2][1], "an effect's append must not write into the worker's options")

	c := env.HTTPClient
	require.NotNil(t, c, "Env.HTTPClient is set")
	require.NotSame(t, http.DefaultClient, c)
	require.Equal(t, effectHTTPTimeout, c.Timeout, "a request cannot hang forever")
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	require.Equal(t, 48, tr.MaxIdleConnsPerHost, "one idle connection per handler")
	require.Equal(t, effectHTTPHandshakeTimeout, tr.TLSHandshakeTimeout)
	require.Equal(t, effectHTTPHeaderTimeout, tr.ResponseHeaderTimeout)
	require.NotNil(t, tr.Proxy, "HTTPS_PROXY is honoured, as by the default transport")

	require.Equal(t, "l", env.LedgerTable)
	require.Equal(t, "http://h", env.HTTPURL)
	v, ok := env.Lookup("EMAIL_FROM")
	require.True(t, ok)
	require.Equal(t, "a@b", v)
	require.Same(t, log, env.Log)
}

// TestBuildEffectGivesTheHTTPEffectTheWorkersClient: the built-in http
// effect uses Env.HTTPClient (its own fallback has no tuned transport).
func TestBuildEffectGivesTheHTTPEffectTheWorkersClient(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eff, err := buildEffect(settings{effects: builtins(), effect: "http", httpURL: "https://example.com/hook", concurrency: 7}, testClients(), log, env())
	require.NoError(t, err)
	h, ok := eff.(*builtin.HTTP)
	require.True(t, ok)
	tr, ok := h.Client.Transport.(*http.Transport)
	require.True(t, ok, "the worker's client, not the effect's fallback")
	require.Equal(t, 7, tr.MaxIdleConnsPerHost)
}

// TestEffectsOfABinary: a binary's own effects join the built-in ones under
// their names; a name taken by a built-in, an empty name or a nil factory
// is refused.
func TestEffectsOfABinary(t *testing.T) {
	t.Parallel()
	mine := func(Env) (effect.Effect, error) { return builtin.Noop{}, nil }
	all, err := withBuiltins(Effects{"mine": mine})
	require.NoError(t, err)
	require.Equal(t, []string{"http", "ledger", "mine", "noop"}, all.names())
	for _, bad := range []Effects{{"ledger": mine}, {"": mine}, {"x": nil}} {
		_, err := withBuiltins(bad)
		require.Error(t, err)
	}
	_, err = withBuiltins(Effects{"ledger": mine})
	require.ErrorContains(t, err, `"ledger" passed to worker.Main is a built-in one`)
}

// TestHTTPEffectValidatesURL: the http effect's factory names its flag.
func TestHTTPEffectValidatesURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x", "localhost:8080", "http://"} {
		_, err := builtins()["http"](Env{HTTPURL: u})
		require.ErrorContains(t, err, "--http-url (WORKER_HTTP_URL)", u)
	}
}
