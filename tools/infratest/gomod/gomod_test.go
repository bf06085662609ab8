// Package gomod_test keeps the library's go.mod free of test and tooling
// dependencies: a program that imports github.com/exactlyonce/exactly must
// not pull them. They belong in tools/go.mod (make lint checks the same).
package gomod_test

import (
	"os"
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
