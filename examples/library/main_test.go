package main

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestDocShowsThisExample keeps docs/LIBRARY.md's "Use it as a library" in
// step with this file, which the build compiles.
func TestDocShowsThisExample(t *testing.T) {
	testenv.RequireDocShows(t, "docs/LIBRARY.md", "examples/library")
}
