package main

import (
	"testing"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestREADMEShowsThisExample keeps README.md's "Your own effect" in step with
// this file, which the build compiles.
func TestREADMEShowsThisExample(t *testing.T) {
	testenv.RequireREADMEShows(t, "examples/custom-effect")
}
