package consoletest_test

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	ctest "github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/tools/consoletest"
)

// TestConsoleInChromium drives worker console in a headless Chromium over
// the seeded in-memory stores, as an operator would: find a message (and
// one that is in the DLQ), list the conflicts, read a dead-letter queue, preview and run a redrive of one group, forget a
// stuck record, release a held outbox group, each checked in the stores.
// Without chromium it fails under EXACTLY_REQUIRE_INTEGRATION=1 (make
// test, whose .ci/run installs it) and skips otherwise.
func TestConsoleInChromium(t *testing.T) {
	path, err := consoletest.Chromium()
	if err != nil {
		if os.Getenv("EXACTLY_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("%v: the console's end-to-end test needs it", err)
		}
		t.Skipf("%v (make test requires it)", err)
	}
	ctx := context.Background()
	w, err := ctest.New(ctx, time.Now())
	require.NoError(t, err)
	base, stop, err := consoletest.Serve(w, true)
	require.NoError(t, err)
	defer stop()
	bctx, cancel := consoletest.Browser(ctx, path, t.TempDir(), 1280, 900)
	defer cancel()
	bctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelT()
	// Start the browser on bctx: a first run on a step's context would tie
	// the tab to that step's deadline.
	require.NoError(t, chromedp.Do(bctx))
	// do runs one step of the walk, each with its own deadline, so that a
	// failure names the step.
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			b, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("%s: %v: %s", step, err, b)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}

	// Find a message by queue, group and dedup id.
	do("find a message",
		chromedp.Navigate(base+"/find"),
		chromedp.SetValue(chromedp.CSS("#queue"), "orders.fifo"),
		chromedp.SendKeys(chromedp.CSS("#group"), w.DoneGroup),
		chromedp.SendKeys(chromedp.CSS("#dedup_id"), w.DoneDedupID),
		chromedp.Submit(chromedp.CSS("#findform")),
		chromedp.WaitVisible(chromedp.CSS("#record")),
	)
	rec := text("#record")
	require.Contains(t, rec, "COMPLETED")
	require.Contains(t, rec, w.DoneKey)
	require.Contains(t, rec, "balance_cents")
	require.Contains(t, rec, w.ConflictHash, "the conflict noted on the record")
	require.Contains(t, text("#where"), "done: its effect was applied")

	// Where is order-1410 now? In the DLQ, with its failure reason.
	do("find a dead letter",
		chromedp.Navigate(base+"/find?queue=orders.fifo&dedup_id=order-1410"),
		chromedp.WaitVisible(chromedp.CSS("#dead")),
	)
	require.Contains(t, text("#where"), "in the dead-letter queue orders-dlq.fifo")
	require.Contains(t, text("#dead"), "payload is not JSON")

	// The conflicts, from the menu.
	do("open the conflicts",
		chromedp.Click(chromedp.CSS(`nav a[href="/conflicts"]`)),
		chromedp.WaitVisible(chromedp.CSS("#conflicts")),
	)
	cf := text("#conflicts")
	require.Contains(t, cf, w.DoneKey)
	require.Contains(t, cf, w.ConflictHash)
	require.Contains(t, cf, w.ConflictMessageID)

	// Read the DLQ; preview and run a redrive of acct-7.
	do("open the DLQ from the overview",
		chromedp.Navigate(base+"/"),
		chromedp.Click(chromedp.CSS(`a[href="/dlq?queue=orders.fifo"]`)),
		chromedp.WaitVisible(chromedp.CSS("#dlqform")),
	)
	dl := text("#dlqform")
	require.Contains(t, dl, "ledger: account acct-7 is closed")
	require.Contains(t, dl, "order-1410")
	require.NotContains(t, dl, "4111", "bodies hidden")
	do("tick acct-7 and preview",
		chromedp.Click(chromedp.CSS(`input[name="group"][value="acct-7"]`)),
		chromedp.Click(chromedp.CSS("#preview")),
		chromedp.WaitVisible(chromedp.CSS("#changes")),
	)
	require.Contains(t, text("#changes"), "This will move 2 messages")
	do("confirm the redrive",
		chromedp.Click(chromedp.CSS("#confirm button")),
		chromedp.WaitVisible(chromedp.CSS("#done")),
	)
	require.Contains(t, text("#done"), "Moved 2 messages")
	n, err := w.DLQDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "acct-9's message stays in the DLQ")
	n, err = w.QueueDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n, "acct-7's two are back in the queue")

	// Forget the oldest stuck record.
	do("open the stuck records", chromedp.Navigate(base+"/stuck"))
	do("open a stuck record's forget page",
		chromedp.WaitVisible(chromedp.CSS("#stuck")),
		chromedp.Click(chromedp.CSS(`#stuck a[href^="/forget"]`)),
		chromedp.WaitVisible(chromedp.CSS("#changes")),
	)
	require.Contains(t, text("#changes"), w.StuckKeys[0])
	do("confirm forget",
		chromedp.Click(chromedp.CSS("#confirm button")),
		chromedp.WaitVisible(chromedp.CSS("#done")),
	)
	r, err := w.Record(ctx, w.StuckKeys[0])
	require.NoError(t, err)
	require.Nil(t, r, "forgotten")
	r, err = w.Record(ctx, w.StuckKeys[1])
	require.NoError(t, err)
	require.NotNil(t, r, "the other stays")

	// Release the held outbox group.
	do("open the held group's release page",
		chromedp.Navigate(base+"/outbox"),
		chromedp.WaitVisible(chromedp.CSS("#outbox")),
		chromedp.Click(chromedp.CSS(`#outbox a[href^="/outbox/release"]`)),
		chromedp.WaitVisible(chromedp.CSS("#changes")),
	)
	require.Contains(t, text("#changes"), w.HeldID)
	do("confirm release",
		chromedp.Click(chromedp.CSS("#confirm button")),
		chromedp.WaitVisible(chromedp.CSS("#done")),
	)
	held, err := w.Held(ctx)
	require.NoError(t, err)
	require.False(t, held, "released")

	// The release page again: the group is not held any more, and the
	// page says so.
	do("the release page again", chromedp.Navigate(base+"/outbox/release?queue="+url.QueryEscape(w.Confirm)+"&group="+w.HeldGroup),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	e := text("#error")
	require.Contains(t, e, "409")
	require.Contains(t, e, "is not held (released or dropped already?)")
}
