package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rootsRequire is the require line and go.sum lines of rootsModule at the
// version the repository's go.mod pins.
func rootsRequire(t *testing.T) (req, sums string) {
	t.Helper()
	f, err := os.Open("../../go.sum")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	var lines []string
	var version string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == rootsModule {
			lines = append(lines, sc.Text())
			version = strings.TrimSuffix(fields[1], "/go.mod")
		}
	}
	require.NotEmpty(t, lines, "go.sum has no %s", rootsModule)
	return "require " + rootsModule + " " + version + "\n", strings.Join(lines, "\n") + "\n"
}

// fakeDist writes a release directory as make release does, with a small
// static program standing in for the worker (linking the CA roots when
// roots is set), zipped under zipName, and its images.
func fakeDist(t *testing.T, zipName string, roots bool) string {
	t.Helper()
	src := t.TempDir()
	mod, main := "module x\n\ngo 1.26.0\n", "package main\n\nfunc main() {}\n"
	if roots {
		req, sums := rootsRequire(t)
		mod += req
		main = "package main\n\nimport _ \"" + rootsModule + "\"\n\nfunc main() {}\n"
		require.NoError(t, os.WriteFile(filepath.Join(src, "go.sum"), []byte(sums), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte(mod), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o600))
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
		writeImage(t, filepath.Join(dir, "worker-image-"+arch+".tar"), arch, b, "65532:65532")
		sum("worker-linux-" + arch)
		sum("worker-lambda-" + arch + ".zip")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sums.String()), 0o600))
	return dir
}

// writeImage saves an image as `podman save` does (a Docker archive):
// manifest.json, the configuration, one layer holding worker.
func writeImage(t *testing.T, path, arch string, worker []byte, user string) {
	t.Helper()
	var cfg image
	cfg.Architecture, cfg.OS = arch, "linux"
	cfg.Config.User = user
	cfg.Config.ExposedPorts = map[string]struct{}{"9090/tcp": {}}
	cfg.Config.Entrypoint, cfg.Config.Cmd = []string{"/worker"}, []string{"run"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.licenses": "Apache-2.0", "org.opencontainers.image.version": "v0.0.0-test"}
	cb, err := json.Marshal(cfg)
	require.NoError(t, err)
	var layer strings.Builder
	lw := tar.NewWriter(&layer)
	require.NoError(t, lw.WriteHeader(&tar.Header{Name: "worker", Mode: 0o755, Size: int64(len(worker)), Typeflag: tar.TypeReg}))
	_, err = lw.Write(worker)
	require.NoError(t, err)
	require.NoError(t, lw.Close())
	mb, err := json.Marshal([]map[string]any{{"Config": "cfg.json", "Layers": []string{"l1/layer.tar"}}})
	require.NoError(t, err)
	f, err := os.Create(path)
	require.NoError(t, err)
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", mb}, {"cfg.json", cb}, {"l1/layer.tar", []byte(layer.String())}} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}))
		_, err = tw.Write(e.data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, f.Close())
}

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	good := fakeDist(t, "bootstrap", true)
	require.NoError(t, check(good, true))

	// A zip whose executable is not named bootstrap; binaries without
	// their CA roots.
	err := check(fakeDist(t, "worker", false), true)
	require.ErrorContains(t, err, "want bootstrap alone")
	require.ErrorContains(t, err, "does not link "+rootsModule)

	// An image run as root, an image of another binary, no image.
	amd, err := os.ReadFile(filepath.Join(good, "worker-linux-amd64"))
	require.NoError(t, err)
	arm, err := os.ReadFile(filepath.Join(good, "worker-linux-arm64"))
	require.NoError(t, err)
	writeImage(t, filepath.Join(good, "worker-image-amd64.tar"), "amd64", amd, "0")
	writeImage(t, filepath.Join(good, "worker-image-arm64.tar"), "arm64", amd, "65532:65532")
	err = check(good, true)
	require.ErrorContains(t, err, `worker-image-amd64.tar: runs as user "0"`)
	require.ErrorContains(t, err, "worker-image-arm64.tar: /worker is not worker-linux-arm64")
	require.NoError(t, os.Remove(filepath.Join(good, "worker-image-amd64.tar")))
	require.ErrorContains(t, check(good, true), "worker-image-amd64.tar: open")
	require.NoError(t, check(good, false), "-no-image leaves the images out")
	writeImage(t, filepath.Join(good, "worker-image-amd64.tar"), "amd64", amd, "65532:65532")
	writeImage(t, filepath.Join(good, "worker-image-arm64.tar"), "arm64", arm, "65532:65532")
	require.NoError(t, check(good, true))

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
	err = check(good, true)
	require.ErrorContains(t, err, "SHA256SUMS does not list worker-linux-arm64")
	require.ErrorContains(t, err, "no SBOM of worker-linux-amd64")
	require.ErrorContains(t, err, "worker-linux-amd64: built for EM_AARCH64, want EM_X86_64")
}
