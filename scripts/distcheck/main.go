// Command distcheck checks a release directory (make release, GoReleaser's
// dist/): for each architecture a static Linux binary worker-linux-<arch>,
// a Lambda zip worker-lambda-<arch>.zip holding exactly one executable
// named bootstrap, an SBOM of the binary, and SHA256SUMS naming every
// binary and zip with its hash. It exits non-zero naming what is wrong.
//
//	go run ./scripts/distcheck dist
package main

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// arches are the release's architectures and their ELF machines.
var arches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: distcheck DIR")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "distcheck: "+err.Error())
		os.Exit(1)
	}
}

func check(dir string) error {
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
	return checkELF(f, path, machine)
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
