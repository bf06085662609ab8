package cli_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/console/consoletest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/outbox"
)

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// TestConsoleBinaryGuards runs the built worker console, read-write on a
// loopback port, over the console's seeded world on the emulators, and
// sends it what a web page on the operator's machine could (DNS rebinding:
// a forged Host, a foreign Origin, a cross-site fetch) and a confirmation
// token posted for another target: every one refused, nothing changed;
// then each write as its confirmation page made it: done. Every write:
// forget, redrive, outbox release and drop. A name given with
// --allowed-host (a proxy's) is served.
func TestConsoleBinaryGuards(t *testing.T) {
	sqsc := testenv.SQS(t)
	db := testenv.DynamoDB(t)
	ctx := context.Background()
	w, err := consoletest.Seed(ctx, sqsc, db, testenv.Name("console")+"-", time.Now())
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, u := range []string{w.Queue, w.DLQ, w.Confirm} {
			_, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
		for _, tb := range []string{w.DedupTable, w.OutboxTable} {
			_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
	})
	p := startWorker(t, "console", "--addr", "127.0.0.1:0", "--write", "--queue", w.Queue, "--queue", w.Confirm,
		"--table", w.DedupTable, "--outbox-table", w.OutboxTable, "--allowed-host", "console.example.com")
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
	})
	testenv.Eventually(t, 15*time.Second, func() bool { _, ok := p.field("console started", "addr"); return ok }, "the console listens")
	a, _ := p.field("console started", "addr")
	addr := a.(string)
	base := "http://" + addr
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, host string, form url.Values, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Host = host
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	confirm := func(path string) url.Values {
		t.Helper()
		code, page := send(http.MethodGet, path, addr, nil)
		require.Equal(t, http.StatusOK, code, page)
		v := url.Values{}
		for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
			v.Add(m[1], html.UnescapeString(m[2]))
		}
		require.NotEmpty(t, v.Get("csrf"), path)
		return v
	}
	own := []string{"Origin", base, "Sec-Fetch-Site", "same-origin"}
	refused := func(what string, code int, body string) {
		t.Helper()
		require.Contains(t, []int{http.StatusForbidden, http.StatusMisdirectedRequest}, code, "%s: %s", what, body)
	}
	forget := "/forget?key=" + url.QueryEscape(w.StuckKeys[0])
	held := "queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.HeldGroup

	// A page on attacker.example, its name re-pointed at 127.0.0.1.
	rebound := strings.Replace(addr, "127.0.0.1", "attacker.example", 1)
	code, body := send(http.MethodGet, forget, rebound, nil)
	require.Equal(t, http.StatusMisdirectedRequest, code, body)
	require.NotContains(t, body, "csrf")
	code, body = send(http.MethodPost, "/forget", rebound, confirm(forget), "Origin", "http://"+rebound)
	refused("a forged Host", code, body)
	code, body = send(http.MethodPost, "/forget", addr, confirm(forget), "Origin", "http://"+rebound)
	refused("a foreign Origin", code, body)
	code, body = send(http.MethodPost, "/forget", addr, confirm(forget), "Sec-Fetch-Site", "cross-site")
	refused("a cross-site fetch", code, body)
	f := confirm("/forget?key=" + url.QueryEscape(w.StuckKeys[1]))
	f.Set("csrf", confirm(forget).Get("csrf"))
	code, body = send(http.MethodPost, "/forget", addr, f, own...)
	refused("a token for another record", code, body)

	preview := "/dlq/preview?queue=" + url.QueryEscape(w.Queue) + "&group=acct-9"
	code, body = send(http.MethodPost, "/dlq/redrive", addr, confirm(preview), "Origin", "http://"+rebound)
	refused("a redrive from a foreign Origin", code, body)
	f = confirm(preview)
	f.Set("group", "acct-7")
	code, body = send(http.MethodPost, "/dlq/redrive", addr, f, own...)
	refused("a redrive token for another group", code, body)
	code, body = send(http.MethodPost, "/outbox/release", addr, confirm("/outbox/release?"+held), "Sec-Fetch-Site", "same-site")
	refused("a release from a same-site page", code, body)
	f = confirm("/outbox/drop?" + held)
	f.Set("id", "confirm-1701")
	code, body = send(http.MethodPost, "/outbox/drop", addr, f, own...)
	refused("a drop token for another message", code, body)

	n, err := w.DLQDepth(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "nothing redriven")
	for _, k := range w.StuckKeys {
		r, err := w.Record(ctx, k)
		require.NoError(t, err)
		require.NotNil(t, r, "nothing forgotten")
	}
	isHeld, err := w.Held(ctx)
	require.NoError(t, err)
	require.True(t, isHeld, "neither released nor dropped")

	// The console's own forms, as a browser and as curl send them.
	code, body = send(http.MethodPost, "/forget", addr, confirm(forget), own...)
	require.Equal(t, http.StatusOK, code, body)
	r, err := w.Record(ctx, w.StuckKeys[0])
	require.NoError(t, err)
	require.Nil(t, r, "forgotten")
	code, body = send(http.MethodPost, "/dlq/redrive", addr, confirm(preview))
	require.Equal(t, http.StatusOK, code, "no Origin, no Sec-Fetch-Site (curl): the token decides: %s", body)
	require.Contains(t, body, "Moved 1 messages")
	// Through a TLS proxy that forwards its own Host: the allowed name.
	code, page := send(http.MethodGet, "/outbox/release?"+held, "console.example.com", nil)
	require.Equal(t, http.StatusOK, code, page)
	f = url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		f.Add(m[1], html.UnescapeString(m[2]))
	}
	code, body = send(http.MethodPost, "/outbox/release", "console.example.com", f, "Origin", "https://console.example.com", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, code, body)
	isHeld, err = w.Held(ctx)
	require.NoError(t, err)
	require.False(t, isHeld, "released")
	// The relay meets SQS's refusal again: held again, then dropped.
	_, err = (&outbox.Relay{DB: db, SQS: sqsc, Table: w.OutboxTable, Logger: slog.New(slog.DiscardHandler)}).Sweep(ctx)
	require.NoError(t, err)
	code, body = send(http.MethodPost, "/outbox/drop", addr, confirm("/outbox/drop?"+held), own...)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Dropped message "+w.HeldID)
}
