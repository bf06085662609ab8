package main

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBuildsFromAModuleOfItsOwn builds this example the way README.md (Your
// own effect) tells a user to, from a module of their own that requires
// exactly (here replaced by this checkout): the static binary
// (CGO_ENABLED=0, the version stamped into worker.Version), the Lambda zip
// with bootstrap, made by scripts/lambdazip run from the user's module, and
// the image, whose Dockerfile (the repository's, copied into the module)
// builds MAIN=. into /worker.
func TestBuildsFromAModuleOfItsOwn(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	mod := t.TempDir()
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte(`module example.com/email-worker

go 1.26.0

require github.com/exactlyonce/exactly v0.0.0

replace github.com/exactlyonce/exactly => `+root+"\n"), 0o644))

	goCmd := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOWORK=off"}, env...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	// go mod tidy resolves the module's graph as it does for a user, through
	// the GOPROXY the environment names: tidy also reads the go.mod files and
	// the test dependencies of exactly's own dependencies, which a cache warmed
	// only by building this checkout does not hold (on a warm cache it fetches
	// nothing). Every step after it runs offline: the build, the zip and the
	// version stamp need nothing tidy did not record.
	goCmd(nil, "mod", "tidy")
	offline := "GOPROXY=off"
	bin := filepath.Join(mod, "bootstrap")
	goCmd([]string{offline, "CGO_ENABLED=0"}, "build", "-trimpath", "-tags", "lambda.norpc",
		"-ldflags", "-X github.com/exactlyonce/exactly/worker.Version=v0.0.0-mine", "-o", bin, ".")

	// The binary is the worker's command line with the email effect.
	out, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "v0.0.0-mine")
	cmd := exec.Command(bin, "run", "--queue", "http://127.0.0.1:1/000000000000/q.fifo", "--effect", "nope")
	cmd.Env = []string{"AWS_REGION=us-east-1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.ExitCode(), "%s", stderr.String())
	require.Contains(t, stderr.String(), "email", "the binary's own effect is offered")

	// The Lambda zip: bootstrap, executable.
	zipPath := filepath.Join(mod, "function.zip")
	goCmd([]string{offline}, "run", "github.com/exactlyonce/exactly/scripts/lambdazip", "-o", zipPath, "-name", "bootstrap", bin)
	zr, err := zip.OpenReader(zipPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = zr.Close() })
	require.Len(t, zr.File, 1)
	require.Equal(t, "bootstrap", zr.File[0].Name)
	require.NotZero(t, zr.File[0].Mode()&0o111, "executable")

	// The image: the repository's Dockerfile builds MAIN (. in a module of
	// one's own) from the build context into /worker, its entry point.
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	for _, want := range []string{
		"COPY go.mod go.sum ./", "COPY . .", `-o /out/worker "${MAIN}"`,
		"COPY --from=build /out/worker /worker", `ENTRYPOINT ["/worker"]`,
	} {
		require.Contains(t, string(df), want)
	}
}
