package exactly_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// publicPackages returns the library's public packages (what `go doc` shows a
// user), by directory: the module root and each top-level directory that
// holds a non-main package, but internal/, examples/, scripts/, tools/ and
// cmd/.
func publicPackages(t *testing.T) map[string]string {
	t.Helper()
	pkgs := map[string]string{".": "exactly"}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	for _, e := range entries {
		switch name := e.Name(); {
		case !e.IsDir(), strings.HasPrefix(name, "."), name == "internal", name == "examples",
			name == "scripts", name == "tools", name == "cmd", name == "infra":
		default:
			files, _ := filepath.Glob(filepath.Join(name, "*.go"))
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
				require.NoError(t, err)
				if file.Name.Name != "main" {
					pkgs[name] = file.Name.Name
				}
				break
			}
		}
	}
	return pkgs
}

// parsedPackage is one directory's Go files, parsed with comments.
type parsedPackage struct {
	files map[string]*ast.File // by file name
}

func parseDir(t *testing.T, dir string) parsedPackage {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	p := parsedPackage{files: map[string]*ast.File{}}
	fset := token.NewFileSet()
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		p.files[name] = f
	}
	return p
}

// exported returns the package's exported top-level names, with the
// exported fields and methods of each type as "Type.Name".
func (p parsedPackage) exported() map[string]bool {
	names := map[string]bool{}
	for name, f := range p.files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					continue
				}
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if ix, ok := recv.(*ast.IndexExpr); ok {
					recv = ix.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					}
				}
			}
		}
	}
	return names
}

const module = "github.com/exactlyonce/exactly"

// internalImports maps a file's import names to their paths, for the
// imports of the module's internal packages.
func internalImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(path, module+"/internal/") {
			continue
		}
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		out[name] = path
	}
	return out
}

// publicValuesShowingInternalNames returns, for each exported constant or
// variable of a public package whose declaration (what `go doc` prints)
// names an internal package's identifier, a line saying which.
func publicValuesShowingInternalNames(p parsedPackage) []string {
	var bad []string
	for name, f := range p.files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		internal := internalImports(f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				exported := false
				for _, n := range vs.Names {
					exported = exported || n.IsExported()
				}
				if !exported {
					continue
				}
				for _, v := range vs.Values {
					ast.Inspect(v, func(n ast.Node) bool {
						sel, ok := n.(*ast.SelectorExpr)
						if !ok {
							return true
						}
						if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
							bad = append(bad, name+": "+vs.Names[0].Name+" = "+id.Name+"."+sel.Sel.Name+
								" (go doc shows the internal name, not the value: write the value)")
						}
						return true
					})
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// docRef is a "pkg.Name" or "pkg.Type.Name" in a comment.
var docRef = regexp.MustCompile(`(?:^|[^\w./*-])([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)

// badDocRefs returns, for each doc comment of a public package's files
// (tests' too, for examples) that names an internal package's identifier
// or a public package's name that does not exist, a line saying which.
func badDocRefs(p parsedPackage, public, internalPkgs map[string]map[string]bool) []string {
	var bad []string
	for name, f := range p.files {
		shown := shownComments(f)
		for _, cg := range f.Comments {
			text := cg.Text()
			for _, m := range docRef.FindAllStringSubmatch(text, -1) {
				pkg, ident, sub := m[1], m[2], m[3]
				if names, ok := public[pkg]; ok {
					if !names[ident] {
						bad = append(bad, name+": "+pkg+"."+ident+" does not exist")
					} else if sub != "" && !names[ident+"."+sub] {
						bad = append(bad, name+": "+pkg+"."+ident+"."+sub+" does not exist")
					}
					continue
				}
				if internalPkgs[pkg][ident] && shown[cg] && !strings.HasSuffix(name, "_test.go") {
					bad = append(bad, name+": "+pkg+"."+ident+" names an internal package, which a user cannot see")
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// shownComments returns the comments `go doc` shows of a file: the
// package's, and those of its exported declarations, their fields and
// methods.
func shownComments(f *ast.File) map[*ast.CommentGroup]bool {
	shown := map[*ast.CommentGroup]bool{f.Doc: true}
	fields := func(l *ast.FieldList) {
		for _, fld := range l.List {
			shown[fld.Doc], shown[fld.Comment] = true, true
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() {
				shown[d.Doc] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							shown[d.Doc], shown[s.Doc], shown[s.Comment] = true, true, true
						}
					}
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					shown[d.Doc], shown[s.Doc], shown[s.Comment] = true, true, true
					switch ty := s.Type.(type) {
					case *ast.StructType:
						fields(ty.Fields)
					case *ast.InterfaceType:
						fields(ty.Methods)
					}
				}
			}
		}
	}
	delete(shown, nil)
	return shown
}

// internalPackages returns the exported names of each of the module's
// internal packages, by package name (so that aws's config.LoadDefaultConfig
// is not taken for internal/config's).
func internalPackages(t *testing.T) map[string]map[string]bool {
	t.Helper()
	entries, err := os.ReadDir("internal")
	require.NoError(t, err)
	pkgs := map[string]map[string]bool{}
	for _, e := range entries {
		if e.IsDir() {
			pkgs[e.Name()] = parseDir(t, filepath.Join("internal", e.Name())).exported()
		}
	}
	return pkgs
}

// TestGoDocShowsNoInternalName: what `go doc` shows of a public package
// names nothing a user cannot look up. An exported constant or variable is
// not declared from an internal package's (go doc would print
// "DefaultWaitTime = pool.DefaultWaitTime", not 20 s); a doc comment names
// no internal package's identifier (dedup.MaxResultBytes), and each
// "pkg.Name" (or "pkg.Type.Field") it names of a public package exists
// (NewDynamoDBClient's once named a ledger constructor that never was).
func TestGoDocShowsNoInternalName(t *testing.T) {
	t.Parallel()
	dirs := publicPackages(t)
	require.Contains(t, dirs, "idempotency")
	require.Contains(t, dirs, "outbox")
	parsed := map[string]parsedPackage{}
	public := map[string]map[string]bool{}
	for dir, name := range dirs {
		parsed[dir] = parseDir(t, dir)
		public[name] = parsed[dir].exported()
	}
	internalPkgs := internalPackages(t)
	for dir := range dirs {
		require.Empty(t, publicValuesShowingInternalNames(parsed[dir]), "package %s", dir)
		require.Empty(t, badDocRefs(parsed[dir], public, internalPkgs), "package %s", dir)
	}
}

// TestGoDocCheckCatchesDrift: the checks above fail on a constant declared
// from an internal one, a comment naming an internal identifier and one
// naming a public identifier that does not exist.
func TestGoDocCheckCatchesDrift(t *testing.T) {
	t.Parallel()
	src := `package p

import "github.com/exactlyonce/exactly/internal/pool"

// Wait is as long as pool.DefaultWaitTime; see idempotency.NewLedger and
// idempotency.Config.DynamoDB.
const Wait = pool.DefaultWaitTime
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.ParseComments)
	require.NoError(t, err)
	p := parsedPackage{files: map[string]*ast.File{"p.go": f}}
	require.Equal(t, []string{"p.go: Wait = pool.DefaultWaitTime (go doc shows the internal name, not the value: write the value)"},
		publicValuesShowingInternalNames(p))
	public := map[string]map[string]bool{"idempotency": {"Config": true, "Config.DynamoDB": true}}
	require.Equal(t, []string{
		"p.go: idempotency.NewLedger does not exist",
		"p.go: pool.DefaultWaitTime names an internal package, which a user cannot see",
	}, badDocRefs(p, public, map[string]map[string]bool{"pool": {"DefaultWaitTime": true}}))
}

// TestExamplesUsePublicPackagesOnly: a runnable example is code a user
// copies, so no example file of a public package (example_test.go, or any
// test file with an Example function) imports an internal package; the
// test kit (exactlytest) has the fakes they need.
func TestExamplesUsePublicPackagesOnly(t *testing.T) {
	t.Parallel()
	examples := 0
	for dir := range publicPackages(t) {
		for name, f := range parseDir(t, dir).files {
			if !strings.HasSuffix(name, "_test.go") || !hasExample(f) {
				continue
			}
			examples++
			for alias, path := range internalImports(f) {
				t.Errorf("%s: a runnable example imports %s (as %s), which a user cannot import: use exactlytest's fakes", name, path, alias)
			}
		}
	}
	require.GreaterOrEqual(t, examples, 5)
}

func hasExample(f *ast.File) bool {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
			return true
		}
	}
	return false
}
