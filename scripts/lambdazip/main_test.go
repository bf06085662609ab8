package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func noEnv(string) (string, bool) { return "", false }

// TestReproducible: the same binary gives the same zip, whose one entry is
// an executable bootstrap with the binary's bytes.
func TestReproducible(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	content := bytes.Repeat([]byte("\x7fELF not really "), 4096)
	require.NoError(t, os.WriteFile(bin, content, 0o755))

	a, b := filepath.Join(dir, "a.zip"), filepath.Join(dir, "b.zip")
	require.NoError(t, run([]string{"-o", a, bin}, noEnv))
	// A later mtime on the input changes nothing.
	require.NoError(t, os.Chtimes(bin, time.Now(), time.Now().Add(time.Hour)))
	require.NoError(t, run([]string{"-o", b, bin}, noEnv))
	za, err := os.ReadFile(a)
	require.NoError(t, err)
	zb, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, za, zb)

	zr, err := zip.OpenReader(a)
	require.NoError(t, err)
	defer zr.Close()
	require.Len(t, zr.File, 1)
	f := zr.File[0]
	require.Equal(t, "bootstrap", f.Name)
	require.Equal(t, os.FileMode(0o755), f.Mode().Perm())
	require.True(t, f.Mode().IsRegular())
	require.Equal(t, time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC), f.Modified.UTC())
	rc, err := f.Open()
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.Equal(t, content, got)
}

func TestSourceDateEpochAndErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	require.NoError(t, os.WriteFile(bin, []byte("x"), 0o755))
	out := filepath.Join(dir, "x.zip")
	env := func(k string) (string, bool) { return "1700000000", k == "SOURCE_DATE_EPOCH" }
	require.NoError(t, run([]string{"-o", out, "-name", "bootstrap", bin}, env))
	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	require.Equal(t, time.Unix(1700000000, 0).UTC(), zr.File[0].Modified.UTC())
	zr.Close()

	require.ErrorContains(t, run([]string{bin}, noEnv), "usage")
	bad := func(k string) (string, bool) { return "yesterday", k == "SOURCE_DATE_EPOCH" }
	require.ErrorContains(t, run([]string{"-o", out, bin}, bad), "SOURCE_DATE_EPOCH")
	require.Error(t, run([]string{"-o", out, filepath.Join(dir, "missing")}, noEnv))
	left, err := filepath.Glob(filepath.Join(dir, ".lambdazip-*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file left behind")
}
