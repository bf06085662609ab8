// Package gomod_test keeps the library's go.mod free of test and tooling
// dependencies: a program that imports github.com/exactlyonce/exactly must
// not pull them. They belong in tools/go.mod (make lint checks the same).
package gomod_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// rootGoMod is the library module's go.mod, from tools/infratest/gomod.
const rootGoMod = "../../../go.mod"

// forbidden are module path prefixes the library must not require: hcl/v2 and
// go-cty parse the Terraform in tools/infratest/terraform.
var forbidden = []string{"github.com/hashicorp/hcl", "github.com/zclconf/go-cty"}

func TestRootModuleRequiresNoTestTooling(t *testing.T) {
	src, err := os.ReadFile(rootGoMod)
	require.NoError(t, err)
	f, err := modfile.ParseLax(rootGoMod, src, nil)
	require.NoError(t, err)
	require.Equal(t, "github.com/exactlyonce/exactly", f.Module.Mod.Path, "%s is not the library's go.mod", rootGoMod)
	for _, r := range f.Require {
		for _, p := range forbidden {
			require.False(t, strings.HasPrefix(r.Mod.Path, p),
				"%s requires %s: test tooling belongs in tools/go.mod, not in the library's", rootGoMod, r.Mod.Path)
		}
	}
}

// testOnly are modules the library's own tests use, which its go.mod may
// require because module graph pruning keeps them out of a user's build.
var testOnly = []string{"github.com/stretchr/testify", "go.uber.org/goleak"}

// TestAProgramPullsNoTestTooling builds the package list of a program in a
// module of its own that imports every public package of the library: none
// of its packages comes from the library's test dependencies.
func TestAProgramPullsNoTestTooling(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	write("go.mod", "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/exactlyonce/exactly v0.0.0\n\nreplace github.com/exactlyonce/exactly => "+root+"\n")
	var imports strings.Builder
	for _, p := range []string{"", "/effect", "/exactlytest", "/idempotency", "/outbox", "/worker"} {
		imports.WriteString("\t_ \"github.com/exactlyonce/exactly" + p + "\"\n")
	}
	write("main.go", "package main\n\nimport (\n"+imports.String()+")\n\nfunc main() {}\n")
	run := func(env []string, args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOWORK=off"}, env...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	// tidy resolves the graph through the environment's GOPROXY, as it does
	// for a user (it reads go.mod files and test dependencies of the
	// library's dependencies that a cache warmed by building the library does
	// not hold); the package list after it is read offline.
	run(nil, "mod", "tidy")
	deps := run([]string{"GOPROXY=off"}, "list", "-deps", ".")
	require.Contains(t, deps, "github.com/exactlyonce/exactly/outbox\n", "the program imports the library")
	for _, p := range testOnly {
		require.NotContains(t, deps, p, "a program importing the library builds %s", p)
	}
}
