package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeDist writes a release directory as make release does, with a small
// static program standing in for the worker, zipped under zipName.
func fakeDist(t *testing.T, zipName string) string {
	t.Helper()
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module x\n\ngo 1.26.0\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600))
	dir := t.TempDir()
	var sums strings.Builder
	sum := func(name string) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		h := sha256.Sum256(b)
		sums.WriteString(hex.EncodeToString(h[:]) + "  " + name + "\n")
	}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, "worker-linux-"+arch)
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		b, err := os.ReadFile(bin)
		require.NoError(t, err)
		zf, err := os.Create(filepath.Join(dir, "worker-lambda-"+arch+".zip"))
		require.NoError(t, err)
		zw := zip.NewWriter(zf)
		h := &zip.FileHeader{Name: zipName, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, zf.Close())
		require.NoError(t, os.WriteFile(bin+".cdx.json", []byte("{}"), 0o600))
		sum("worker-linux-" + arch)
		sum("worker-lambda-" + arch + ".zip")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o600))
	return dir
}

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	good := fakeDist(t, "bootstrap")
	require.NoError(t, check(good))

	// A zip whose executable is not named bootstrap.
	require.ErrorContains(t, check(fakeDist(t, "worker")), "want bootstrap alone")

	// A binary SHA256SUMS does not list, an SBOM missing, a binary of
	// another architecture.
	sums, err := os.ReadFile(filepath.Join(good, "SHA256SUMS"))
	require.NoError(t, err)
	var kept []string
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if !strings.HasSuffix(l, "worker-linux-arm64") {
			kept = append(kept, l)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(good, "SHA256SUMS"), []byte(strings.Join(kept, "\n")+"\n"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(good, "worker-linux-amd64.cdx.json")))
	require.NoError(t, os.Rename(filepath.Join(good, "worker-linux-arm64"), filepath.Join(good, "worker-linux-amd64")))
	err = check(good)
	require.ErrorContains(t, err, "SHA256SUMS does not list worker-linux-arm64")
	require.ErrorContains(t, err, "no SBOM of worker-linux-amd64")
	require.ErrorContains(t, err, "worker-linux-amd64: built for EM_AARCH64, want EM_X86_64")
}
