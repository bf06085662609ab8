// Command tfprovidermin writes what it takes to build the pinned Terraform AWS
// provider with only the service packages the repository's Terraform uses:
// the same source and so the same schema for every resource and data source
// the modules name, in a build that fits a CI run on a cold machine (the
// whole provider compiles about 260 service packages and takes well over an
// hour on two cores; infra/terraform/README.md has the figures).
//
//	tfprovidermin -provider DIR TFDIR...
//
// DIR is a writable copy of the provider module's source (go build refuses
// an overlay of a file in the module cache). Every resource and data block
// of the .tf files under each TFDIR is looked up in the provider's generated
// service registrations (internal/service/*/service_package_gen.go); the
// command rewrites DIR's list of service packages
// (internal/provider/sdkv2/service_packages_gen.go) to hold those alone, and
// prints the packages it kept (-n: prints them and writes nothing, which
// works on the module cache's read-only copy). A type no package registers
// fails it: a misspelled resource type is an error here, as terraform
// validate makes it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// registryFile is the provider's generated list of service packages, the
// one file the build replaces.
const registryFile = "internal/provider/sdkv2/service_packages_gen.go"

// alwaysKept are packages the provider needs whatever the modules name:
// meta registers the provider's own data sources (aws_region,
// aws_partition, ...).
var alwaysKept = []string{"meta"}

var (
	blockRe    = regexp.MustCompile(`(?m)^\s*(resource|data)\s+"(aws_[a-z0-9_]+)"`)
	typeNameRe = regexp.MustCompile(`TypeName:\s*"(aws_[a-z0-9_]+)"`)
)

func main() {
	provider := flag.String("provider", "", "the provider module's source folder")
	dryRun := flag.Bool("n", false, "print the packages it would keep and write nothing (the folder may be read-only)")
	flag.Parse()
	if *provider == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: tfprovidermin -provider DIR TFDIR...")
		os.Exit(2)
	}
	kept, err := run(*provider, flag.Args(), !*dryRun)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tfprovidermin:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(kept, " "))
}

func run(provider string, tfDirs []string, write bool) ([]string, error) {
	types, err := usedTypes(tfDirs)
	if err != nil {
		return nil, err
	}
	owner, err := registrations(provider)
	if err != nil {
		return nil, err
	}
	kept := slices.Clone(alwaysKept)
	var unknown []string
	for _, t := range types {
		pkg, ok := owner[t]
		if !ok {
			unknown = append(unknown, t)
			continue
		}
		if !slices.Contains(kept, pkg) {
			kept = append(kept, pkg)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no service package of %s registers %s", provider, strings.Join(unknown, ", "))
	}
	slices.Sort(kept)
	src, err := os.ReadFile(filepath.Join(provider, registryFile))
	if err != nil {
		return nil, err
	}
	cut, err := cutRegistry(src, kept)
	if err != nil {
		return nil, err
	}
	if !write {
		return kept, nil
	}
	return kept, os.WriteFile(filepath.Join(provider, registryFile), cut, 0o644)
}

// usedTypes lists the resource and data source types the .tf files under
// dirs name, sorted, each once.
func usedTypes(dirs []string) ([]string, error) {
	var types []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".tf") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range blockRe.FindAllSubmatch(src, -1) {
				types = append(types, string(m[2]))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(types) == 0 {
		return nil, errors.New("the .tf files name no aws_ resource or data source")
	}
	slices.Sort(types)
	return slices.Compact(types), nil
}

// registrations maps every type name the provider registers to the service
// package that registers it.
func registrations(provider string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(provider, "internal/service/*/service_package_gen.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no internal/service/*/service_package_gen.go: not the provider's source", provider)
	}
	owner := make(map[string]string)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pkg := filepath.Base(filepath.Dir(f))
		for _, m := range typeNameRe.FindAllSubmatch(src, -1) {
			owner[string(m[1])] = pkg
		}
	}
	return owner, nil
}

// cutRegistry keeps, of the generated registry, the imports and the list
// entries of the kept packages and every other line as it is.
func cutRegistry(src []byte, kept []string) ([]byte, error) {
	const servicePrefix = `"github.com/hashicorp/terraform-provider-aws/internal/service/`
	var b bytes.Buffer
	found := map[string]int{}
	for line := range strings.Lines(string(src)) {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, servicePrefix):
			pkg := strings.TrimSuffix(strings.TrimPrefix(t, servicePrefix), `"`)
			if !slices.Contains(kept, pkg) {
				continue
			}
			found[pkg]++
		case strings.HasSuffix(t, ".ServicePackage(ctx),"):
			pkg := strings.TrimSuffix(t, ".ServicePackage(ctx),")
			if !slices.Contains(kept, pkg) {
				continue
			}
			found[pkg]++
		}
		b.WriteString(line)
	}
	for _, pkg := range kept {
		if found[pkg] != 2 {
			return nil, fmt.Errorf("%s: package %s is not imported and listed once each (the generated file's shape changed?)", registryFile, pkg)
		}
	}
	return b.Bytes(), nil
}
