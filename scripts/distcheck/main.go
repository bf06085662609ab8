// Command distcheck checks a release directory (make release, GoReleaser's
// dist/): for each architecture a static Linux binary worker-linux-<arch>
// that carries its own CA roots, a Lambda zip worker-lambda-<arch>.zip
// holding exactly one executable named bootstrap, an SBOM of the binary,
// SHA256SUMS naming every binary and zip with its hash, and the image
// worker-image-<arch>.tar (as `docker save` or `podman save` writes it):
// that architecture, the released binary alone as /worker, a non-root user,
// `worker run`, :9090, the licence label. -no-image leaves the images out
// (a snapshot made where no container engine is). It exits non-zero naming
// what is wrong.
//
//	go run ./scripts/distcheck [-no-image] dist
package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
)

// arches are the release's architectures and their ELF machines.
var arches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// rootsModule is the module whose roots the binary must link: the image
// has no CA bundle.
const rootsModule = "golang.org/x/crypto/x509roots/fallback"

func main() {
	noImage := flag.Bool("no-image", false, "the release has no images (made where no container engine is)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: distcheck [-no-image] DIR")
		os.Exit(2)
	}
	if err := check(flag.Arg(0), !*noImage); err != nil {
		fmt.Fprintln(os.Stderr, "distcheck: "+err.Error())
		os.Exit(1)
	}
}

func check(dir string, images bool) error {
	sums, err := readSums(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return err
	}
	var errs []error
	for arch, machine := range arches {
		bin := "worker-linux-" + arch
		errs = append(errs, checkBinary(filepath.Join(dir, bin), machine))
		errs = append(errs, checkZip(filepath.Join(dir, "worker-lambda-"+arch+".zip"), machine))
		for _, name := range []string{bin, "worker-lambda-" + arch + ".zip"} {
			errs = append(errs, checkSum(dir, name, sums))
		}
		if _, err := os.Stat(filepath.Join(dir, bin+".cdx.json")); err != nil {
			errs = append(errs, fmt.Errorf("no SBOM of %s: %w", bin, err))
		}
		if images {
			errs = append(errs, checkImage(filepath.Join(dir, "worker-image-"+arch+".tar"), filepath.Join(dir, bin), arch))
		}
	}
	return errors.Join(errs...)
}

// checkELF: a static executable for machine.
func checkELF(r io.ReaderAt, name string, machine elf.Machine) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable: %w", name, err)
	}
	if f.Machine != machine {
		return fmt.Errorf("%s: built for %s, want %s", name, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (CGO_ENABLED=0 builds a static binary)", name)
		}
	}
	return nil
}

func checkBinary(path string, machine elf.Machine) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // opened for reading
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not executable", path)
	}
	if err := checkELF(f, path, machine); err != nil {
		return err
	}
	info, err := buildinfo.Read(f)
	if err != nil {
		return fmt.Errorf("%s: no Go build information: %w", path, err)
	}
	if !slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == rootsModule }) {
		return fmt.Errorf("%s does not link %s: on the image's empty base it would have no CA roots for TLS", path, rootsModule)
	}
	return nil
}

func checkZip(path string, machine elf.Machine) error {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return err
	}
	defer func() { _ = zr.Close() }() // opened for reading
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
		names := make([]string, len(zr.File))
		for i, f := range zr.File {
			names[i] = f.Name
		}
		return fmt.Errorf("%s holds %q: want bootstrap alone (the provided.al2023 runtime runs it)", path, names)
	}
	f := zr.File[0]
	if !f.Mode().IsRegular() || f.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: bootstrap has mode %s, want an executable file", path, f.Mode())
	}
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }() // read only
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return checkELF(strings.NewReader(string(b)), path+": bootstrap", machine)
}

func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // opened for reading
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("%s: cannot read line %q", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}

func checkSum(dir, name string, sums map[string]string) error {
	want, ok := sums[name]
	if !ok {
		return fmt.Errorf("SHA256SUMS does not list %s", name)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	got := sha256.Sum256(b)
	if hex.EncodeToString(got[:]) != want {
		return fmt.Errorf("SHA256SUMS: %s has another hash", name)
	}
	return nil
}

// image is what distcheck reads of a saved image: its configuration (the
// OCI/Docker image config) and the files its layers hold.
type image struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	files map[string]tarFile
}

type tarFile struct {
	mode int64
	data []byte
}

// checkImage: the saved image at path is for arch and holds the released
// binary bin alone, as /worker, run as `worker run` by a non-root user.
func checkImage(path, bin, arch string) error {
	img, err := readImage(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(path+": "+format, a...)) }
	if img.Architecture != arch || img.OS != "linux" {
		bad("built for %s/%s, want linux/%s", img.OS, img.Architecture, arch)
	}
	if img.Config.User != "65532:65532" {
		bad("runs as user %q, want 65532:65532 (non-root)", img.Config.User)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{"/worker"}) || !slices.Equal(img.Config.Cmd, []string{"run"}) {
		bad("runs %q %q, want [/worker] [run]", img.Config.Entrypoint, img.Config.Cmd)
	}
	if _, ok := img.Config.ExposedPorts["9090/tcp"]; !ok {
		bad("does not expose 9090/tcp (health and metrics)")
	}
	if l := img.Config.Labels["org.opencontainers.image.licenses"]; l != "Apache-2.0" {
		bad("licence label %q, want Apache-2.0", l)
	}
	if img.Config.Labels["org.opencontainers.image.version"] == "" {
		bad("no version label")
	}
	var names []string
	for name := range img.files {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"worker"}) {
		bad("holds %q, want the worker alone", names)
	}
	if w, ok := img.files["worker"]; ok {
		want, err := os.ReadFile(bin)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !bytes.Equal(w.data, want):
			bad("/worker is not %s", filepath.Base(bin))
		case w.mode&0o111 == 0:
			bad("/worker is not executable")
		}
	}
	return errors.Join(errs...)
}

// readImage reads a saved image: manifest.json names the configuration
// and the layers (plain or gzipped tars), each read in order.
func readImage(path string) (*image, error) {
	outer, err := readTar(path)
	if err != nil {
		return nil, err
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	m, ok := outer["manifest.json"]
	if !ok {
		return nil, errors.New("no manifest.json: not a saved image")
	}
	if err := json.Unmarshal(m.data, &manifest); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	if len(manifest) != 1 {
		return nil, fmt.Errorf("manifest.json lists %d images, want one", len(manifest))
	}
	img := &image{files: map[string]tarFile{}}
	cfg, ok := outer[manifest[0].Config]
	if !ok {
		return nil, fmt.Errorf("no configuration %s", manifest[0].Config)
	}
	if err := json.Unmarshal(cfg.data, img); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	for _, l := range manifest[0].Layers {
		layer, ok := outer[l]
		if !ok {
			return nil, fmt.Errorf("no layer %s", l)
		}
		var r io.Reader = bytes.NewReader(layer.data)
		if bytes.HasPrefix(layer.data, []byte{0x1f, 0x8b}) {
			if r, err = gzip.NewReader(r); err != nil {
				return nil, fmt.Errorf("layer %s: %w", l, err)
			}
		}
		files, err := tarFiles(r)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l, err)
		}
		for name, f := range files {
			img.files[name] = f
		}
	}
	return img, nil
}

func readTar(path string) (map[string]tarFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // opened for reading
	return tarFiles(f)
}

// tarFiles returns the regular files of a tar, by clean relative name.
func tarFiles(r io.Reader) (map[string]tarFile, error) {
	files := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(path.Clean("/"+h.Name), "/")] = tarFile{mode: h.Mode, data: b}
	}
}
