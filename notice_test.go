package exactly_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLicenceFiles: LICENSE is the Apache License 2.0 with the project's
// copyright line, and NOTICE names every module linked into the worker
// (the binaries, zips and image a release ships) that has a NOTICE file of
// its own, which section 4(d) of that licence asks a redistribution to carry.
func TestLicenceFiles(t *testing.T) {
	t.Parallel()
	licence := readFile(t, "LICENSE")
	require.Contains(t, licence, "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, licence, "END OF TERMS AND CONDITIONS")
	require.Contains(t, licence, "Copyright 2026 The exactly authors")

	notice := readFile(t, "NOTICE")
	cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc",
		"-f", "{{with .Module}}{{.Path}} {{.Dir}}{{end}}", "./cmd/worker")
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	out, err := cmd.Output()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, ok := strings.Cut(line, " ")
		if !ok || seen[path] || dir == "" || path == "github.com/exactlyonce/exactly" {
			continue
		}
		seen[path] = true
		for _, name := range []string{"NOTICE", "NOTICE.txt", "NOTICE.md"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				require.Contains(t, notice, "\n---- "+path+"\n", "%s ships %s: copy it into NOTICE", path, name)
			}
		}
	}
	require.NotEmpty(t, seen, "go list found no modules")
}
