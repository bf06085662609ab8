package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPageFitsItsWordBudget renders docs/BENCHMARKS.md from the results
// the repository holds, as make bench-report does, and holds its prose to
// PageWordBudget words; it also checks that the committed page is that
// rendering, so the page cannot be edited by hand or left stale.
func TestPageFitsItsWordBudget(t *testing.T) {
	t.Parallel()
	docs := filepath.Join("..", "..", "..", "docs")
	b, err := os.ReadFile(filepath.Join(docs, "bench-results.json"))
	require.NoError(t, err)
	var r Result
	require.NoError(t, json.Unmarshal(b, &r))
	md := Markdown(&r)
	require.LessOrEqual(t, ProseWords(md), PageWordBudget, "the page's prose, outside tables, charts, headings and code")
	page, err := os.ReadFile(filepath.Join(docs, "BENCHMARKS.md"))
	require.NoError(t, err)
	require.Equal(t, md, string(page), "docs/BENCHMARKS.md is not the rendering of docs/bench-results.json: run `cd tools && go run ./cmd/bench -render ../docs/bench-results.json -report ../docs/BENCHMARKS.md`")
	for _, section := range []string{"## Targets of issue 22", "## At AWS-like latency", "## Curves: cost as work grows", "### Message groups", "## Where the worker's CPU goes"} {
		require.Contains(t, md, section)
	}
	require.Contains(t, md, "("+MethodLink+")", "the page links its methods")
}

func TestProseWords(t *testing.T) {
	t.Parallel()
	md := "# Title words here\n\nOne two three.\n\n| a | b |\n|---|---|\n| x y z | w |\n\n![chart words](c.svg)\n\n```sh\nmake bench # not prose\n```\n\n- four five\n"
	require.Equal(t, 5, ProseWords(md))
	require.Equal(t, 0, ProseWords(strings.Repeat("| t |\n", 3)))
}

// TestDominantBreaksTiesByName: SQS receives and delete batches are often
// as many as each other; the page names the same one every rendering.
func TestDominantBreaksTiesByName(t *testing.T) {
	t.Parallel()
	s := Sample{Counts: map[string]float64{"applied": 1000}, Requests: map[string]float64{
		"SQS.ReceiveMessage": 100, "SQS.DeleteMessageBatch": 100, "SQS.ChangeMessageVisibilityBatch": 3, "DynamoDB.PutItem": 1000,
	}}
	for range 50 {
		op, v := dominant(s, "SQS.")
		require.Equal(t, "SQS.DeleteMessageBatch", op)
		require.InDelta(t, 0.1, v, 1e-12)
	}
}
