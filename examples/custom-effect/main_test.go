package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEShowsThisExample keeps README.md's "Your own effect" in step with
// this file, which the build compiles.
func TestREADMEShowsThisExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	code := string(src)
	code = code[strings.Index(code, "package main"):]
	require.Contains(t, string(readme), "```go\n"+code+"```", "README's example must be examples/custom-effect/main.go from `package main` on")
}
