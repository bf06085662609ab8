package main

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestDocShowsThisExample keeps README.md's library snippet in step with
// this file, which the build compiles.
func TestDocShowsThisExample(t *testing.T) {
	testenv.RequireDocShows(t, "README.md", "examples/quickstart")
}
