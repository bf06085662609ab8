// Command lambdazip writes a Lambda deployment package: a zip holding one
// executable, named bootstrap for the provided.al2023 runtime. The zip is
// reproducible: the same input gives the same bytes (fixed time stamp, mode
// 0755, no other metadata), so a package's hash changes only when the
// binary does.
//
//	go run ./scripts/lambdazip -o dist/worker-lambda-arm64.zip dist/worker-linux-arm64
//
// The time stamp is SOURCE_DATE_EPOCH when set, else 1980-01-01 00:00 UTC
// (the earliest a zip can hold).
package main

import (
	"archive/zip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "lambdazip: "+err.Error())
		os.Exit(1)
	}
}

func run(args []string, lookup func(string) (string, bool)) error {
	fs := flag.NewFlagSet("lambdazip", flag.ContinueOnError)
	out := fs.String("o", "", "zip file to write (required)")
	name := fs.String("name", "bootstrap", "name of the executable inside the zip")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 1 {
		return errors.New("usage: lambdazip -o OUT.zip [-name bootstrap] BINARY")
	}
	mtime, err := stamp(lookup)
	if err != nil {
		return err
	}
	return write(*out, fs.Arg(0), *name, mtime)
}

// stamp is the time stamp of the zip's entry.
func stamp(lookup func(string) (string, bool)) (time.Time, error) {
	if v, ok := lookup("SOURCE_DATE_EPOCH"); ok && v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec < 315532800 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970, from 1980 on", v)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC), nil
}

// write zips binary as name into out, through a temporary file, so that a
// failed run never leaves a half-written package behind.
func write(out, binary, name string, mtime time.Time) (err error) {
	in, err := os.Open(binary)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // opened for reading
	tmp, err := os.CreateTemp(filepath.Dir(out), ".lambdazip-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()           // a failed write is the error reported
			_ = os.Remove(tmp.Name()) // best effort: a leftover temporary file
		}
	}()
	zw := zip.NewWriter(tmp)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: mtime}
	h.SetMode(0o755) // Lambda runs bootstrap: it must be executable
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err = io.Copy(w, in); err != nil {
		return err
	}
	if err = zw.Close(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
