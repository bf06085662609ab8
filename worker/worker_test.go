package worker

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/cli"
)

// TestMainStampsTheVersion: the version stamped into this package at build
// time is the one the command line reports and logs.
func TestMainStampsTheVersion(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9-test"
	if code := Main([]string{"version"}, nil); code != ExitOK {
		t.Fatalf("worker version exited %d", code)
	}
	if cli.Version != "v9.9.9-test" {
		t.Fatalf("the command line reports %q", cli.Version)
	}
}

// TestMainRefusesABuiltinName: an effect named like a built-in one is a
// configuration error, before any command runs.
func TestMainRefusesABuiltinName(t *testing.T) {
	noop := func(Env) (effect.Effect, error) { return effect.Func(nil), nil }
	require.Equal(t, ExitConfig, Main([]string{"version"}, Effects{"ledger": noop}))
	require.Equal(t, ExitConfig, Main([]string{"version"}, Effects{"x": nil}))
	require.Equal(t, ExitOK, Main([]string{"version"}, Effects{"x": noop}))
}

// TestEnvCarriesTheWorkersEnv: a Factory gets what the command line
// fills, and its effect and error are the command line's.
func TestEnvCarriesTheWorkersEnv(t *testing.T) {
	var got Env
	want := effect.Func(func(context.Context, effect.Input) (effect.Output, error) { return effect.Output{}, nil })
	own := cliEffects(Effects{"x": func(e Env) (effect.Effect, error) { got = e; return want, nil }})
	lookup := func(k string) (string, bool) { return "v-" + k, true }
	hc := &http.Client{}
	e, err := own["x"](cli.Env{AWS: aws.Config{Region: "eu-west-1"}, HTTPClient: hc, Log: slog.Default(), Lookup: lookup, LedgerTable: "l"})
	require.NoError(t, err)
	require.NotNil(t, e)
	require.Equal(t, "eu-west-1", got.AWS.Region)
	require.Same(t, hc, got.HTTPClient)
	require.Same(t, slog.Default(), got.Log)
	v, _ := got.Lookup("K")
	require.Equal(t, "v-K", v)
}

// TestExitCodesAreTheCommandLines: the documented values are the codes
// the command line returns.
func TestExitCodesAreTheCommandLines(t *testing.T) {
	require.Equal(t, []int{cli.ExitOK, cli.ExitError, cli.ExitConfig}, []int{ExitOK, ExitError, ExitConfig})
}
