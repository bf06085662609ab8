// Package logfields holds the library's slog calls to one way of logging
// durations: a key ending in _ms with whole milliseconds (d.Milliseconds()),
// never a time.Duration, which slog's JSON handler writes as nanoseconds.
package logfields

import (
	"go/ast"
	"go/types"
	"testing"

	"golang.org/x/tools/go/packages"
)

func TestNoDurationInLogs(t *testing.T) {
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  "../../..", // the root module: the library, its commands and examples
	}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !isType(p.TypesInfo.TypeOf(sel.X), "*log/slog.Logger") {
					return true
				}
				for _, a := range call.Args {
					if isType(p.TypesInfo.TypeOf(a), "time.Duration") {
						t.Errorf("%s: a time.Duration logged with %s (nanoseconds in JSON): log it as <key>_ms, d.Milliseconds()",
							p.Fset.Position(a.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

func isType(t types.Type, name string) bool {
	return t != nil && types.TypeString(t, nil) == name
}
