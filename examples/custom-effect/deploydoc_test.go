package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeployRecipeIsTheOneTested: docs/DEPLOY.md's "Build it in your own
// module" is the one recipe for a binary of one's own, and it is what
// TestBuildsFromAModuleOfItsOwn runs from a module outside the checkout:
// go get, a static go build of the module's root stamping worker.Version,
// the zip by scripts/lambdazip, the repository's Dockerfile with MAIN=.;
// no make target (the Makefile's MAIN builds this repository's packages
// only: from a user's module it fails with "outside main module"). This
// example's README links the recipe rather than holding a copy.
func TestDeployRecipeIsTheOneTested(t *testing.T) {
	t.Parallel()
	deploy, err := os.ReadFile(filepath.Join("..", "..", "docs", "DEPLOY.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(deploy), "\n#### Build it in your own module\n")
	require.True(t, ok, "DEPLOY.md has the section")
	section, _, _ = strings.Cut(section, "\n### ")
	require.Contains(t, section, "`go get github.com/exactlyonce/exactly`")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "the section holds the recipe")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	recipe := strings.ReplaceAll(block, "\\\n", " ")
	for _, want := range []string{
		"CGO_ENABLED=0 ", "go build -trimpath -tags lambda.norpc ",
		"-X github.com/exactlyonce/exactly/worker.Version=", "-o dist/bootstrap .",
		"go run github.com/exactlyonce/exactly/scripts/lambdazip -o dist/function.zip -name bootstrap dist/bootstrap",
		"docker build --build-arg MAIN=. ",
	} {
		require.Contains(t, recipe, want)
	}
	require.NotContains(t, recipe, "make ", "a make target does not build from a module of one's own")

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "(../../docs/DEPLOY.md#build-it-in-your-own-module)")
	require.NotContains(t, string(readme), "go build", "the README links the recipe, not a copy of it")
}
