package main

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestREADMEShowsThisExample keeps README.md's "Use it as a library" in
// step with this file, which the build compiles.
func TestREADMEShowsThisExample(t *testing.T) {
	testenv.RequireREADMEShows(t, "examples/library")
}
