package exactly_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdFence = regexp.MustCompile("(?m)^\\s*```")
)

// TestDocLinksResolve: every relative link in the repository's Markdown
// (README.md, CONTRIBUTING.md, docs/, the modules' READMEs) names a file or
// directory inside the repository, and a #fragment on a Markdown target names
// one of its headings. No doc points outside the repository: no absolute
// path, no file: URL, no path that climbs out of it.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	docs := markdownFiles(t, root)
	require.Contains(t, docs, "README.md")
	require.Contains(t, docs, "docs/DESIGN.md")
	checked := 0
	for _, doc := range docs {
		for _, target := range links(t, filepath.Join(root, doc)) {
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			require.False(t, strings.HasPrefix(target, "/") || strings.HasPrefix(target, "file:") || filepath.IsAbs(target),
				"%s links to %s: a doc must not point outside the repository", doc, target)
			path, frag, _ := strings.Cut(target, "#")
			file := filepath.Join(root, doc)
			if path != "" {
				file = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			}
			rel, err := filepath.Rel(root, file)
			require.NoError(t, err)
			rel = filepath.ToSlash(rel)
			require.False(t, rel == ".." || strings.HasPrefix(rel, "../"),
				"%s links to %s, outside the repository", doc, target)
			_, err = os.Stat(file)
			require.NoError(t, err, "%s links to %s, which does not exist", doc, target)
			if frag != "" && strings.HasSuffix(file, ".md") {
				require.Contains(t, anchors(t, file), frag, "%s links to %s: %s has no such heading", doc, target, rel)
			}
		}
	}
	require.Greater(t, checked, 50)
}

// relPath is a relative path that climbs (../), written anywhere in a doc:
// a link, a code span, a fenced block.
var relPath = regexp.MustCompile("(?:^|[\\s`'\"(\\[])((?:\\./)?(?:\\.\\./)+[^\\s`'\")\\]]*)")

// TestDocsNameNoPathOutsideTheRepository: no Markdown file names a path
// that climbs out of the repository, in a link or not (a code span, a
// command): a reader of the repository alone cannot follow it, as
// "see `../shared/EMULATORS.md` in the workspace" could not be.
func TestDocsNameNoPathOutsideTheRepository(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	for _, doc := range markdownFiles(t, root) {
		for _, p := range outOfRepoPaths(t, root, doc) {
			t.Errorf("%s names %s, outside the repository: docs point inside it only", doc, p)
		}
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "a.md"), []byte("see `../../shared/EMULATORS.md`, `../shared/EMULATORS.md` and [b](../b.md)\n```\ncd ../../t6\n```\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.md"), nil, 0o600))
	require.Equal(t, []string{"../../shared/EMULATORS.md", "../shared/EMULATORS.md", "../../t6"}, outOfRepoPaths(t, dir, "sub/a.md"),
		"the check sees a path in a code span and a fenced block, one to nothing, and leaves one to a file of the repository alone")
}

// outOfRepoPaths returns the climbing paths doc (relative to root) names
// that resolve outside root, or inside it to nothing (what was meant is
// outside: "../shared" from a directory of the repository).
func outOfRepoPaths(t *testing.T, root, doc string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, doc))
	require.NoError(t, err)
	var out []string
	for _, m := range relPath.FindAllStringSubmatch(string(src), -1) {
		rel, err := filepath.Rel(root, filepath.Join(root, filepath.Dir(doc), filepath.FromSlash(m[1])))
		require.NoError(t, err)
		if rel == ".." || strings.HasPrefix(filepath.ToSlash(rel), "../") {
			out = append(out, m[1])
			continue
		}
		path, _, _ := strings.Cut(strings.TrimRight(rel, ".,;:"), "#")
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestDocLinksCatchesDrift: the checks above fail on a broken link, a
// missing heading and a link out of the repository.
func TestDocLinksCatchesDrift(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := filepath.Join(dir, "a.md")
	require.NoError(t, os.WriteFile(doc, []byte("# Title\n\n## Some `code` here, too\n\n[x](b.md) [y](#some-code-here-too)\n```\n[z](ignored.md)\n```\n"), 0o600))
	require.Equal(t, []string{"b.md", "#some-code-here-too"}, links(t, doc))
	require.Equal(t, []string{"title", "some-code-here-too"}, anchors(t, doc))
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return docs
}

// outsideFences returns the text of a Markdown file without its fenced code
// blocks, where a "](" is code, not a link.
func outsideFences(t *testing.T, file string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	parts := mdFence.Split(string(src), -1)
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 0 {
			b.WriteString(p)
		}
	}
	return b.String()
}

func links(t *testing.T, file string) []string {
	t.Helper()
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(outsideFences(t, file), -1) {
		out = append(out, m[1])
	}
	return out
}

// anchors returns the fragments GitHub gives a file's headings: lower case,
// punctuation but '-' and '_' dropped, spaces as '-', a repeat numbered.
func anchors(t *testing.T, file string) []string {
	t.Helper()
	seen := map[string]int{}
	var out []string
	for _, line := range strings.Split(outsideFences(t, file), "\n") {
		h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// TestDesignListsEveryLimitCase: docs/DESIGN.md's limits section names every
// SQS and SNS contract case of a limit (internal/memsqs/sqscontract,
// internal/memsns/snscontract), marks each
// limit fauxqs does not enforce (Quirks.Unenforced) as such, and names every
// DynamoDB limit test (internal/memdynamo/limits_test.go). A limit case added
// without its row fails here.
func TestDesignListsEveryLimitCase(t *testing.T) {
	t.Parallel()
	design := readFile(t, "docs/DESIGN.md")
	_, limits, ok := strings.Cut(design, "\n## Limits\n")
	require.True(t, ok, "docs/DESIGN.md has no Limits section")

	for _, suite := range []struct{ contract, quirks, pkg string }{
		{"internal/memsqs/sqscontract/contract.go", "internal/memsqs/contract_test.go", "sqscontract"},
		{"internal/memsns/snscontract/contract.go", "internal/memsns/contract_test.go", "snscontract"},
	} {
		cases := regexp.MustCompile(`\{"(Limits/[A-Za-z]+)"`).FindAllStringSubmatch(readFile(t, suite.contract), -1)
		require.GreaterOrEqual(t, len(cases), 5)
		for _, c := range cases {
			require.Contains(t, limits, "`"+c[1]+"`", "docs/DESIGN.md's limits do not name the %s case %s", suite.pkg, c[1])
		}

		quirks := readFile(t, suite.quirks)
		_, unenforced, ok := strings.Cut(quirks, "Unenforced: []"+suite.pkg+".Limit{")
		require.True(t, ok)
		unenforced, _, _ = strings.Cut(unenforced, "}")
		names := regexp.MustCompile(suite.pkg+`\.(Limit[A-Za-z]+)`).FindAllStringSubmatch(unenforced, -1)
		require.NotEmpty(t, names)
		for _, n := range names {
			row := regexp.MustCompile("(?m)^\\|.*not enforced by fauxqs\\*\\* \\([^)]*quirk `" + n[1] + "`")
			require.Regexp(t, row, limits, "docs/DESIGN.md must mark %s's %s as not enforced by fauxqs", suite.pkg, n[1])
		}
	}

	tests := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9]+)\(`).FindAllStringSubmatch(readFile(t, "internal/memdynamo/limits_test.go"), -1)
	require.GreaterOrEqual(t, len(tests), 5)
	for _, tc := range tests {
		require.Contains(t, limits, "`"+tc[1]+"`", "docs/DESIGN.md's limits do not name %s", tc[1])
	}
}
