package exactly

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigDocsStateTheDefaults: each Config field whose default the
// settings fill in says that value in its doc ("Defaults to 32."), as the
// code has it: a changed default with a stale doc fails here.
func TestConfigDocsStateTheDefaults(t *testing.T) {
	t.Parallel()
	docs := fieldDocs(t, "config.go")
	cfg := Config{Table: "t", Queues: []string{"https://sqs.us-east-1.amazonaws.com/1/q"}}
	w, err := cfg.settings(false)
	require.NoError(t, err)
	l, err := cfg.settings(true)
	require.NoError(t, err)

	for field, value := range map[string]any{
		"Config.KeySource":    w.KeySource,
		"Config.PayloadHash":  w.PayloadHash,
		"Config.Namespace":    w.Namespace,
		"Config.TTL":          w.TTL,
		"Config.Receivers":    w.Receivers,
		"Config.RetryInPlace": w.RetryInPlace,
		"Config.WaitTime":     w.WaitTime,
		"Config.AckDelay":     w.AckDelay,
		"EMF.Interval":        w.EMF.Interval,
	} {
		require.Contains(t, docs[field], "defaults to "+spoken(value), "the doc of %s must state its default", field)
	}
	require.Contains(t, docs["Config.Concurrency"], fmt.Sprintf("defaults to %d for a worker and to %d for a lambda", w.Concurrency, l.Concurrency))
}

// spoken writes a default as the docs do: 24 hours, 50 milliseconds, 32,
// "auto".
func spoken(v any) string {
	switch v := v.(type) {
	case time.Duration:
		for _, u := range []struct {
			d    time.Duration
			name string
		}{{time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}, {time.Millisecond, "millisecond"}} {
			if v%u.d == 0 {
				n := int64(v / u.d)
				if n == 1 {
					return "1 " + u.name
				}
				return fmt.Sprintf("%d %ss", n, u.name)
			}
		}
		return v.String()
	case string:
		return `"` + v + `"`
	default:
		return fmt.Sprint(v)
	}
}

// fieldDocs returns the doc (or line comment) of every field of the
// structs in file, keyed "Type.Field", in lower case on one line.
func fieldDocs(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fl := range st.Fields.List {
			text := fl.Doc.Text() + " " + fl.Comment.Text()
			for _, name := range fl.Names {
				docs[ts.Name.Name+"."+name.Name] = strings.ToLower(strings.Join(strings.Fields(text), " "))
			}
		}
		return false
	})
	return docs
}
