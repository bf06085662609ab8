package console_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/effect"
	"github.com/exactlyonce/exactly/internal/console"
	"github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/internal/dedup"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

func setup(t *testing.T, write bool) (*consoletest.World, http.Handler) {
	t.Helper()
	w, err := consoletest.New(context.Background(), time.Now())
	require.NoError(t, err)
	c, err := console.New(w.Config(write))
	require.NoError(t, err)
	return w, c
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = consoleHost
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	require.NotContains(t, body, "goroutine ", "no stack")
	return rec.Code, body
}

func post(t *testing.T, h http.Handler, path string, form url.Values) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Host = consoleHost
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	require.NotContains(t, body, "goroutine ", "no stack")
	return rec.Code, body
}

// consoleHost is the Host a browser sends to the console of
// consoletest.World.Config (listening on 127.0.0.1:8080).
const consoleHost = "127.0.0.1:8080"

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// form reads a confirmation page's form: its hidden fields.
func form(t *testing.T, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(page, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	require.NotEmpty(t, v.Get("csrf"), "the form carries a CSRF token")
	return v
}

func TestOverview(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	code, body := get(t, h, "/")
	require.Equal(t, http.StatusOK, code, body)
	for _, want := range []string{"orders.fifo", "confirmations.fifo", "orders-dlq.fifo", "after 5 receives", w.DedupTable, ">on</span>", w.OutboxTable, "1 held", "read-only"} {
		require.Contains(t, body, want)
	}
	require.Contains(t, body, `<span class="pill bad">3</span>`, "3 dead letters")
	follow(t, h, body, "/dlq?", "ledger: account acct-7 is closed")
}

func TestFind(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	code, body := get(t, h, "/find")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="findform"`)

	for _, q := range []string{
		"key=" + url.QueryEscape(w.DoneKey),
		"queue=orders.fifo&group=" + w.DoneGroup + "&dedup_id=" + w.DoneDedupID,
		"queue=" + url.QueryEscape(w.Queue) + "&group=" + w.DoneGroup + "&idempotency_key=" + w.DoneDedupID,
	} {
		code, body = get(t, h, "/find?"+q)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "COMPLETED")
		require.Contains(t, body, "done: its effect was applied")
		require.Contains(t, body, `{&#34;balance_cents&#34;:12500}`, "the stored result")
		require.Contains(t, body, "8f1c2d3e-order-1234")
		require.Contains(t, body, "was searched as worker redrive --dry-run lists it: 3 messages read", "the DLQ searched")
		require.Contains(t, body, w.ConflictHash, "the conflicting payload's hash")
		require.Contains(t, body, w.ConflictMessageID)
	}
	_, body = get(t, h, "/find?key="+url.QueryEscape(w.StuckKeys[0]))
	require.Contains(t, body, "its worker stopped")
	require.Contains(t, body, "ended 41m")
	_, body = get(t, h, "/find?key="+url.QueryEscape(w.LiveKey))
	require.Contains(t, body, "being processed")
}

// TestFindWhereNow: a message that went to the DLQ before any claim is
// found there by its queue and dedup id, or by its scoped key (its queue
// read from the key), with the failure reason and time its copy carries;
// the search moves nothing. A message in no place known is a 404 that
// says where it looked.
func TestFindWhereNow(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	for _, q := range []string{
		"queue=orders.fifo&dedup_id=order-1410",
		"key=" + url.QueryEscape(w.DedupScope.Key("", "order-1410")),
	} {
		code, body := get(t, h, "/find?"+q)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "in the dead-letter queue orders-dlq.fifo since ")
		require.Contains(t, body, "effect: payload is not JSON: invalid character &#39;x&#39;")
		require.Contains(t, body, `id="dead"`)
		require.NotContains(t, body, `id="record"`, "no record")
		follow(t, h, body, "/dlq?queue=", `<tr class="hit">`)
	}
	n, err := w.DLQDepth(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n, "searching moves nothing")

	code, body := get(t, h, "/find?queue=orders.fifo&dedup_id=order-9999")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "never claimed: not in orders-dlq.fifo (3 messages read)")
}

// TestConflictsPage: the records that met a conflict, with both payload
// hashes, the conflicting message and when; each links to its record.
func TestConflictsPage(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	code, body := get(t, h, "/conflicts")
	require.Equal(t, http.StatusOK, code, body)
	for _, want := range []string{html.EscapeString(w.DoneKey), dedup.PayloadHash("order-1234"), w.ConflictHash, w.ConflictMessageID} {
		require.Contains(t, body, want)
	}
	// The note is two minutes old on the world's clock; the page reads the
	// wall's, which a loaded machine moves on by a second or more between
	// the seeding and the page.
	require.Regexp(t, `message <code>`+regexp.QuoteMeta(w.ConflictMessageID)+`</code>, 2m\d+s ago`, body)
	require.NotContains(t, body, html.EscapeString(w.StuckKeys[0]), "no conflict, not listed")
	follow(t, h, body, "/find?key=", `id="conflicts"`)
	code, body = get(t, h, "/conflicts?after=%ff")
	require.Equal(t, http.StatusBadRequest, code, body)
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	code, body := get(t, h, "/dlq?queue=orders.fifo")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "ledger: account acct-7 is closed")
	require.Less(t, strings.Index(body, "order-1301"), strings.Index(body, "order-1302"), "in order")
	require.Less(t, strings.Index(body, "group <strong>acct-7"), strings.Index(body, "group <strong>acct-9"))
	require.NotContains(t, body, "4111-1111", "bodies hidden unless asked for")
	_, body = get(t, h, "/dlq?queue=orders.fifo&body=1")
	require.Contains(t, body, "4111-1111", "revealed on request")
	n, err := w.DLQDepth(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n, "reading moves nothing")
	_, body = get(t, h, "/dlq?queue=orders.fifo&find=order-1410")
	require.Contains(t, body, `<tr class="hit"><td><code>`)
}

func TestStuckAndOutboxPages(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	code, body := get(t, h, "/stuck")
	require.Equal(t, http.StatusOK, code, body)
	i0, i1 := strings.Index(body, html.EscapeString(w.StuckKeys[0])), strings.Index(body, html.EscapeString(w.StuckKeys[1]))
	require.True(t, i0 > 0 && i1 > i0, "both, oldest first")
	require.NotContains(t, body, html.EscapeString(w.LiveKey), "a live lease is not stuck")
	follow(t, h, body, `/forget?key=`, "This will delete the record")
	follow(t, h, body, `/find?key=`, "IN_PROGRESS")

	code, body = get(t, h, "/outbox")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, w.HeldGroup)
	require.Contains(t, body, w.PendingGroup)
	require.Contains(t, body, "InvalidParameterValue", "why it is held")
	require.Less(t, strings.Index(body, w.HeldGroup), strings.Index(body, w.PendingGroup), "oldest first")
	follow(t, h, body, `/outbox/release?`, "This will let the relay publish")
	follow(t, h, body, `/outbox/drop?`, "This will skip message")
	follow(t, h, body, `/outbox/group?`, w.HeldID)

	code, body = get(t, h, "/outbox/group?queue="+url.QueryEscape(w.Confirm)+"&group="+w.HeldGroup)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, w.HeldID)
	require.NotContains(t, body, w.HeldBody)
	_, body = get(t, h, "/outbox/group?queue="+url.QueryEscape(w.Confirm)+"&group="+w.HeldGroup+"&body=1")
	require.Contains(t, body, w.HeldBody)
}

// TestReadOnly: the confirmation pages say so and every POST is refused.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	_, body := get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	require.Contains(t, body, "Read-only")
	require.NotContains(t, body, `id="confirm"`)
	for _, p := range []string{"/forget", "/dlq/redrive", "/outbox/release", "/outbox/drop"} {
		code, body := post(t, h, p, url.Values{"key": {w.StuckKeys[0]}})
		require.Equal(t, http.StatusForbidden, code, p)
		require.Contains(t, body, "read-only: start it with --write")
	}
	r, err := w.Record(context.Background(), w.StuckKeys[0])
	require.NoError(t, err)
	require.NotNil(t, r)
}

func TestForget(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	ctx := context.Background()
	code, page := get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	require.Equal(t, http.StatusOK, code, page)
	require.Contains(t, page, "This will delete the record")
	f := form(t, page)
	require.Equal(t, w.StuckKeys[0], f.Get("key"))
	code, body := post(t, h, "/forget", f)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Deleted record")
	r, err := w.Record(ctx, w.StuckKeys[0])
	require.NoError(t, err)
	require.Nil(t, r, "deleted")
	r, err = w.Record(ctx, w.StuckKeys[1])
	require.NoError(t, err)
	require.NotNil(t, r, "only that one")

	code, body = post(t, h, "/forget", f)
	require.Equal(t, http.StatusConflict, code, "a double submission")
	require.Contains(t, body, "submitted already")
	code, body = get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "forgotten already")

	// A record claimed again between the confirmation and the POST is left.
	_, page = get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[1]))
	f = form(t, page)
	_, err = dedup.NewStore(w.DB, w.DedupTable).Claim(ctx, dedup.ClaimRequest{Key: w.StuckKeys[1], PayloadSHA256: dedup.PayloadHash(w.StuckKeys[1]),
		MessageID: "m-again", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err, "a worker takes the stuck record over")
	code, body = post(t, h, "/forget", f)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "changed since it was shown")
	r, err = w.Record(ctx, w.StuckKeys[1])
	require.NoError(t, err)
	require.NotNil(t, r)
}

// TestForgetCompletedSinceShown: a stuck record whose slow worker completes
// it, under the same token, between the confirmation page and the POST is
// left alone: 409, with what the record is now.
func TestForgetCompletedSinceShown(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	ctx := context.Background()
	code, page := get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	require.Equal(t, http.StatusOK, code, page)
	f := form(t, page)
	r, err := w.Record(ctx, w.StuckKeys[0])
	require.NoError(t, err)
	require.Equal(t, dedup.StatusInProgress, r.Status)
	st := dedup.NewStore(w.DB, w.DedupTable)
	require.NoError(t, st.Complete(ctx, dedup.Claim{Key: r.Key, Token: r.Token, Outcome: dedup.Won}, []byte("done"), time.Hour))

	code, body := post(t, h, "/forget", f)
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "changed since it was shown")
	require.Contains(t, body, "it is now COMPLETED")
	r, err = w.Record(ctx, w.StuckKeys[0])
	require.NoError(t, err)
	require.NotNil(t, r, "the completed record stays")
	require.Equal(t, dedup.StatusCompleted, r.Status)
}

func TestRedrive(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	ctx := context.Background()
	code, page := get(t, h, "/dlq/preview?queue=orders.fifo&group=acct-7")
	require.Equal(t, http.StatusOK, code, page)
	require.Contains(t, page, "This will move 2 messages")
	require.Contains(t, page, "worker redrive --dlq "+w.DLQ+" --queue "+w.Queue+" --group acct-7 --dry-run")
	require.NotContains(t, page, "order-1410", "the other group is not in the preview")
	n, err := w.DLQDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "a preview moves nothing")

	code, body := post(t, h, "/dlq/redrive", form(t, page))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Moved 2 messages")
	n, err = w.DLQDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "acct-9's message stays")
	n, err = w.QueueDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n, "3 waiting + 2 redriven")

	code, body = get(t, h, "/dlq/preview?queue=orders.fifo&group=acct-7")
	require.Equal(t, http.StatusConflict, code, "a redrive of a group already gone")
	require.Contains(t, body, "redriven already?")
	// A preview's form posted after its group went another way.
	_, page = get(t, h, "/dlq/preview?queue=orders.fifo&group=acct-9")
	f := form(t, page)
	_, page2 := get(t, h, "/dlq/preview?queue=orders.fifo&group=acct-9")
	code, _ = post(t, h, "/dlq/redrive", form(t, page2))
	require.Equal(t, http.StatusOK, code)
	code, body = post(t, h, "/dlq/redrive", f)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "nothing moved")
}

func TestOutboxRelease(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	ctx := context.Background()
	q := "queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.HeldGroup
	code, page := get(t, h, "/outbox/release?"+q)
	require.Equal(t, http.StatusOK, code, page)
	require.Contains(t, page, "InvalidParameterValue")
	require.Contains(t, page, w.HeldID)
	code, body := post(t, h, "/outbox/release", form(t, page))
	require.Equal(t, http.StatusOK, code, body)
	held, err := w.Held(ctx)
	require.NoError(t, err)
	require.False(t, held, "released")
	code, body = get(t, h, "/outbox/release?"+q)
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, body, "is not held")
}

func TestOutboxDrop(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	ctx := context.Background()
	q := "queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.HeldGroup
	code, page := get(t, h, "/outbox/drop?"+q)
	require.Equal(t, http.StatusOK, code, page)
	f := form(t, page)
	require.Equal(t, w.HeldID, f.Get("id"))
	bad := url.Values{"csrf": f["csrf"], "queue": f["queue"], "group": f["group"], "id": {"confirm-1701"}}
	code, body := post(t, h, "/outbox/drop", bad)
	require.Equal(t, http.StatusForbidden, code, "only the held message, its token bound to its id: %s", body)
	code, body = post(t, h, "/outbox/drop", f)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Dropped message "+w.HeldID)
	held, err := w.Held(ctx)
	require.NoError(t, err)
	require.False(t, held)
}

// TestBadInput: each a clear answer with its status, never a 500.
func TestBadInput(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/find?key=exactly%23nope", 404, "no record for key"},
		{"/find?queue=orders.fifo", 400, "give the message&#39;s id"},
		{"/find?queue=nope.fifo&message_id=x", 404, `queue &#34;nope.fifo&#34; is not one the console was given`},
		{"/dlq?queue=nope.fifo", 404, "is not one the console was given"},
		{"/dlq", 200, "orders-dlq.fifo"},
		{"/dlq?queue=confirmations.fifo", 404, "has no dead-letter queue"},
		{"/dlq/preview?queue=orders.fifo", 400, "choose the groups"},
		{"/dlq/preview?queue=orders.fifo&group=no-such-group", 409, "redriven already?"},
		{"/forget", 400, "which record?"},
		{"/forget?key=nope", 404, "no record"},
		{"/outbox/group?queue=not-a-url&group=g", 400, "which group?"},
		{"/outbox/group?queue=" + url.QueryEscape(w.Confirm) + "&group=nope", 404, "holds no message"},
		{"/outbox/release?queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.PendingGroup, 409, "is not held"},
		{"/stuck?after=%ff%fe", 400, "is not a key this page gave"},
		{"/stuck?after=exactly%23zzz", 200, "Stuck records"},
		{"/no/such/page", 404, "no such page"},
	} {
		code, body := get(t, h, c.path)
		require.Equal(t, c.code, code, "%s: %s", c.path, body)
		require.Contains(t, body, c.want, c.path)
	}
	// CSRF: missing, forged, from another process, stale.
	_, page := get(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	f := form(t, page)
	for name, tok := range map[string]string{"missing": "", "forged": "1.2.3", "other action": ""} {
		g := url.Values{"key": f["key"], "token": f["token"], "csrf": {tok}}
		if name == "other action" {
			_, p := get(t, h, "/outbox/release?queue="+url.QueryEscape(w.Confirm)+"&group="+w.HeldGroup)
			g.Set("csrf", form(t, p).Get("csrf"))
		}
		code, body := post(t, h, "/forget", g)
		require.Equal(t, http.StatusForbidden, code, name)
		require.Contains(t, body, "this form is stale", name)
	}
	other, err := console.New(w.Config(true))
	require.NoError(t, err)
	code, body := post(t, other, "/forget", f)
	require.Equal(t, http.StatusForbidden, code, "a token of another process (a restart)")
	require.Contains(t, body, "from before a restart")
	cfg := w.Config(true)
	cfg.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	cfg.Secret = []byte("s")
	late, err := console.New(cfg)
	require.NoError(t, err)
	cfg.Now = time.Now
	early, err := console.New(cfg)
	require.NoError(t, err)
	_, page = get(t, early, "/forget?key="+url.QueryEscape(w.StuckKeys[0]))
	code, _ = post(t, late, "/forget", form(t, page))
	require.Equal(t, http.StatusForbidden, code, "an expired token")
	r, err := w.Record(context.Background(), w.StuckKeys[0])
	require.NoError(t, err)
	require.NotNil(t, r, "none of them deleted anything")
	code, _ = post(t, h, "/dlq/redrive", url.Values{"csrf": {form(t, mustGet(t, h, "/dlq/preview?queue=orders.fifo&group=acct-7")).Get("csrf")}, "queue": {"orders.fifo"}, "before": {"x"}})
	require.Equal(t, http.StatusForbidden, code, "a form that is not the one its token was issued for")
	require.Equal(t, "orders-dlq.fifo", sqsmsg.QueueName(w.DLQ))
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

// follow finds the first link of page that starts with prefix, as a
// browser reads it, and checks where it leads.
func follow(t *testing.T, h http.Handler, page, prefix, want string) {
	t.Helper()
	for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
		if u := html.UnescapeString(m[1]); strings.HasPrefix(u, prefix) {
			require.Contains(t, mustGet(t, h, u), want, u)
			return
		}
	}
	t.Fatalf("no link to %s", prefix)
}

func mustGet(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	code, body := get(t, h, path)
	require.Equal(t, http.StatusOK, code, body)
	return body
}

func TestBasicAuth(t *testing.T) {
	t.Parallel()
	w, err := consoletest.New(context.Background(), time.Now())
	require.NoError(t, err)
	cfg := w.Config(false)
	cfg.User, cfg.Password = "ops", "correct horse battery"
	h, err := console.New(cfg)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Host = consoleHost
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Basic")
	req.SetBasicAuth("ops", "wrong")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	req.SetBasicAuth("ops", "correct horse battery")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
}

// TestFindByLoggedMessageID: a message the worker moved to the DLQ (its
// copy gets a new message id, and a dedup id of its own made from the
// original's) is found by its queue and either id: the original's, which
// the worker's log line names as message_id, or its copy's, which it
// names as dlq_message_id; with the record of its key (here completed:
// the copy is of a delivery refused as a conflict).
func TestFindByLoggedMessageID(t *testing.T) {
	t.Parallel()
	w, h := setup(t, false)
	ctx := context.Background()
	m := effect.Message{QueueURL: w.Queue, QueueName: "orders.fifo", ID: w.ConflictMessageID, Group: w.DoneGroup, DedupID: w.DoneDedupID,
		Body: `{"order":"1234","amended":true}`}
	in, err := sqsmsg.DeadLetterCopy(w.DLQ, true, m, &m.Body, nil, errors.New("conflict: completed for another payload"), time.Now())
	require.NoError(t, err)
	out, err := w.SQS.SendMessage(ctx, in)
	require.NoError(t, err)
	copyID := aws.ToString(out.MessageId)
	require.NotEqual(t, m.ID, copyID, "the copy has a message id of its own")
	for _, id := range []string{m.ID, copyID} {
		code, body := get(t, h, "/find?queue=orders.fifo&group="+w.DoneGroup+"&message_id="+url.QueryEscape(id))
		require.Equal(t, http.StatusOK, code, "message_id=%s: %s", id, body)
		require.Contains(t, body, "in the dead-letter queue orders-dlq.fifo since ", id)
		require.Contains(t, body, "conflict: completed for another payload", id)
		require.Contains(t, body, `id="record"`, id)
		require.Contains(t, body, "COMPLETED", id)
		require.Contains(t, body, html.EscapeString(w.DoneKey), id)
	}
}

var navRE = regexp.MustCompile(`(?s)<nav>(.*?)</nav>`)

// TestEveryPageReachable: the navigation bar links every top-level page
// (Dead letters too: without a queue it lists the queues that have a
// DLQ), on every page; and following links from it, as an operator
// clicks, reaches every page the console serves by GET (the redrive
// preview by the Dead letters page's form).
func TestEveryPageReachable(t *testing.T) {
	t.Parallel()
	_, h := setup(t, true)
	top := []string{"/", "/find", "/dlq", "/stuck", "/conflicts", "/outbox"}
	nav := func(page string) []string {
		m := navRE.FindStringSubmatch(page)
		require.NotNil(t, m, "a nav bar")
		var out []string
		for _, l := range hrefRE.FindAllStringSubmatch(m[1], -1) {
			out = append(out, html.UnescapeString(l[1]))
		}
		return out
	}
	seen := map[string]bool{}
	queue := []string{"/"}
	for len(queue) > 0 && len(seen) < 200 {
		u := queue[0]
		queue = queue[1:]
		if seen[u] {
			continue
		}
		seen[u] = true
		code, page := get(t, h, u)
		if code != http.StatusOK {
			continue
		}
		require.Equal(t, top, nav(page), "the nav bar of %s", u)
		for _, l := range hrefRE.FindAllStringSubmatch(page, -1) {
			if v := html.UnescapeString(l[1]); strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "/static/") && !seen[v] {
				queue = append(queue, v)
			}
		}
	}
	reached := map[string]bool{}
	for u := range seen {
		if code, _ := get(t, h, u); code == http.StatusOK {
			p, _, _ := strings.Cut(u, "?")
			reached[p] = true
		}
	}
	for _, p := range []string{"/", "/find", "/dlq", "/stuck", "/conflicts", "/forget", "/outbox", "/outbox/group", "/outbox/release", "/outbox/drop"} {
		require.True(t, reached[p], "%s is reached from the nav bar (reached: %v)", p, reached)
	}
	_, body := get(t, h, "/dlq")
	require.Contains(t, body, `href="/dlq?queue=orders.fifo"`, "the queues with a DLQ")
	require.NotContains(t, body, `href="/dlq?queue=confirmations.fifo"`, "no DLQ, not listed")
	require.Contains(t, mustGet(t, h, "/dlq?queue=orders.fifo"), `action="/dlq/preview"`)
}
