// Package makefiles_test checks the Makefile and mk/*.mk: a target that
// writes a file creates the file's folder itself, so that a fresh clone runs
// any target on its own (make tf-validate once wrote into .tools/, which only
// make tf-check created).
package makefiles_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository, from tools/infratest/makefiles.
const root = "../../.."

// recipe is the shell of one rule or define, as written.
type recipe struct {
	where string
	lines []string
}

// recipes splits a makefile into its rules' recipes and its defines' bodies
// (which become recipes where they are called).
func recipes(t *testing.T, file string) []recipe {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []recipe
	var cur *recipe
	inDefine := false
	for i, l := range strings.Split(string(src), "\n") {
		where := filepath.Base(file) + ":" + strconv.Itoa(i+1)
		switch {
		case strings.HasPrefix(l, "define "):
			out = append(out, recipe{where: where})
			cur, inDefine = &out[len(out)-1], true
		case inDefine && strings.HasPrefix(l, "endef"):
			cur, inDefine = nil, false
		case inDefine, strings.HasPrefix(l, "\t") && cur != nil:
			cur.lines = append(cur.lines, l)
		case regexp.MustCompile(`^[^\s#=][^=]*:([^=]|$)`).MatchString(l):
			out = append(out, recipe{where: where})
			cur = &out[len(out)-1]
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
		default:
			cur = nil
		}
	}
	return out
}

// redirect finds the files a recipe writes with a shell redirection (the
// target is group 1). Targets in the shell's own variables ($$tmp, made by
// mktemp) are left out: only paths make names can lack their folder.
var (
	redirect = regexp.MustCompile(`[^0-9&>]>>?\s*(\$\([A-Za-z_@]+\)[^\s;|&)"]*|[A-Za-z.][^\s;|&)"]*/[^\s;|&)"]+)`)
	quoted   = regexp.MustCompile(`"[^"\n]*"|'[^'\n]*'`)
)

func TestEveryWrittenFileHasItsFolderCreated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "mk", "*.mk"))
	require.NoError(t, err)
	files = append(files, filepath.Join(root, "Makefile"))
	written := 0
	for _, file := range files {
		for _, r := range recipes(t, file) {
			// Quoted text is echoed or printed, not redirected to.
			body := " " + quoted.ReplaceAllString(strings.Join(r.lines, "\n"), `""`)
			for _, m := range redirect.FindAllStringSubmatchIndex(body, -1) {
				target := body[m[2]:m[3]]
				if strings.HasPrefix(target, "/dev/") {
					continue
				}
				written++
				// A bare file name lands in the recipe's working directory.
				if !strings.Contains(target, "/") && !strings.HasPrefix(target, "$(") {
					continue
				}
				before := body[:m[0]]
				made := strings.Contains(before, "mkdir -p $(dir "+target+")") ||
					strings.Contains(before, "mkdir -p $(@D)") && target == "$@" ||
					strings.Contains(before, "mkdir -p "+filepath.Dir(target))
				require.True(t, made, "%s: the recipe writes %s without creating its folder first (mkdir -p $(dir %s)): on a fresh clone it fails there", r.where, target, target)
			}
		}
	}
	require.NotZero(t, written, "no redirection found: the parser is broken")
	t.Logf("%d redirections to files checked", written)
}
