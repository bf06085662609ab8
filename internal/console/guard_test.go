package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/exactly/internal/console"
)

// do sends one request with the given Host and headers.
func do(t *testing.T, h http.Handler, method, path, host string, form url.Values, hdr map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
	req.Host = host
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestHostChecked: a request whose Host is not the console's address (a
// page whose name was re-pointed at the console's, DNS rebinding) is
// refused with 421 before anything is read, with or without basic auth;
// the listening address, localhost and loopback literals at its port are
// served.
func TestHostChecked(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	for _, host := range []string{"attacker.example:8080", "attacker.example", "localhost:9999", "127.0.0.1:9999", "", "127.0.0.1.attacker.example:8080"} {
		code, body := do(t, h, http.MethodGet, "/forget?key="+url.QueryEscape(w.StuckKeys[0]), host, nil, nil)
		require.Equal(t, http.StatusMisdirectedRequest, code, "Host %q: %s", host, body)
		require.NotContains(t, body, "csrf", "no confirmation page, no token")
		require.Contains(t, body, "--allowed-host", "says how to allow a name")
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080", "127.0.0.2:8080"} {
		code, body := do(t, h, http.MethodGet, "/", host, nil, nil)
		require.Equal(t, http.StatusOK, code, "Host %q: %s", host, body)
	}

	// Basic auth does not change it: the Host is checked first.
	cfg := w.Config(false)
	cfg.User, cfg.Password = "ops", "correct horse battery"
	a, err := console.New(cfg)
	require.NoError(t, err)
	code, _ := do(t, a, http.MethodGet, "/", "attacker.example:8080", nil, map[string]string{"Authorization": "Basic b3BzOmNvcnJlY3QgaG9yc2UgYmF0dGVyeQ=="})
	require.Equal(t, http.StatusMisdirectedRequest, code)

	// Behind a proxy that forwards its own Host: allowed by name (any
	// port, or the one given).
	cfg = w.Config(false)
	cfg.AllowedHosts = []string{"console.example.com", "ops.example.com:8443"}
	p, err := console.New(cfg)
	require.NoError(t, err)
	for host, want := range map[string]int{"console.example.com": 200, "Console.Example.Com:443": 200, "ops.example.com:8443": 200,
		"ops.example.com": 421, "ops.example.com:443": 421, "attacker.example": 421, "127.0.0.1:8080": 200} {
		code, body := do(t, p, http.MethodGet, "/", host, nil, nil)
		require.Equal(t, want, code, "Host %q: %s", host, body)
	}

	// A console listening on every address serves its IP literals at its
	// port (a rebinding page's Host is always a name), names only when
	// allowed.
	cfg = w.Config(false)
	cfg.Addr = "0.0.0.0:8080"
	everyAddr, err := console.New(cfg)
	require.NoError(t, err)
	for host, want := range map[string]int{"10.0.0.5:8080": 200, "[fd00::5]:8080": 200, "localhost:8080": 200, "10.0.0.5:80": 421, "console.internal:8080": 421} {
		code, body := do(t, everyAddr, http.MethodGet, "/", host, nil, nil)
		require.Equal(t, want, code, "Host %q: %s", host, body)
	}

	_, err = console.New(func() console.Config { c := w.Config(false); c.Addr = ""; return c }())
	require.ErrorContains(t, err, "Addr")
	_, err = console.New(func() console.Config { c := w.Config(false); c.AllowedHosts = []string{"http://x.example"}; return c }())
	require.ErrorContains(t, err, "allowed host")
}

// TestOriginChecked: a write whose Origin is not the console's own, or
// that the browser says is cross-site or same-site, is refused (403) and
// changes nothing, with a valid token; a write with the console's own
// Origin, same-origin, or neither header (curl, a script: not a browser,
// so no CSRF; the token is still needed) goes through.
func TestOriginChecked(t *testing.T) {
	t.Parallel()
	const host = "127.0.0.1:8080"
	w, h := setup(t, true)
	confirm := func() url.Values {
		code, page := do(t, h, http.MethodGet, "/forget?key="+url.QueryEscape(w.StuckKeys[0]), host, nil, nil)
		require.Equal(t, http.StatusOK, code, page)
		return form(t, page)
	}
	for name, hdr := range map[string]map[string]string{
		"foreign origin":       {"Origin": "http://attacker.example:8080"},
		"other port":           {"Origin": "http://127.0.0.1:3000"},
		"null origin":          {"Origin": "null"},
		"garbage origin":       {"Origin": "::"},
		"cross-site":           {"Sec-Fetch-Site": "cross-site"},
		"same-site":            {"Sec-Fetch-Site": "same-site"},
		"own origin, cross":    {"Origin": "http://" + host, "Sec-Fetch-Site": "cross-site"},
		"rebinding, own token": {"Origin": "http://attacker.example:8080", "Sec-Fetch-Site": "same-origin"},
	} {
		code, body := do(t, h, http.MethodPost, "/forget", host, confirm(), hdr)
		require.Equal(t, http.StatusForbidden, code, "%s: %s", name, body)
		require.Contains(t, body, "not sent by the console&#39;s own pages", name)
	}
	r, err := w.Record(t.Context(), w.StuckKeys[0])
	require.NoError(t, err)
	require.NotNil(t, r, "nothing forgotten")

	for name, hdr := range map[string]map[string]string{
		"own origin":   {"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"},
		"localhost":    {"Origin": "http://localhost:8080"},
		"fetch site":   {"Sec-Fetch-Site": "same-origin"},
		"hidden":       {"Origin": "null", "Sec-Fetch-Site": "same-origin"},
		"neither sent": nil,
	} {
		w, h := setup(t, true)
		_, page := do(t, h, http.MethodGet, "/forget?key="+url.QueryEscape(w.StuckKeys[0]), host, nil, nil)
		code, body := do(t, h, http.MethodPost, "/forget", host, form(t, page), hdr)
		require.Equal(t, http.StatusOK, code, "%s: %s", name, body)
		require.Contains(t, body, "Deleted record", name)
	}

	// Behind a TLS proxy: the browser's Origin is the proxy's, allowed by
	// name whatever Host the proxy forwards.
	cfg := w.Config(true)
	cfg.AllowedHosts = []string{"console.example.com"}
	p, err := console.New(cfg)
	require.NoError(t, err)
	_, page := do(t, p, http.MethodGet, "/outbox/release?queue="+url.QueryEscape(w.Confirm)+"&group="+w.HeldGroup, host, nil, nil)
	code, body := do(t, p, http.MethodPost, "/outbox/release", host, form(t, page), map[string]string{"Origin": "https://console.example.com", "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusOK, code, body)
}

// TestTokenBoundToTarget: a confirmation's token confirms only the action
// and the target it was issued for: posted with another key, claim token,
// group, queue, message id, cut-off or count, it is refused (403) and
// nothing changes; the forms as issued go through.
func TestTokenBoundToTarget(t *testing.T) {
	t.Parallel()
	w, h := setup(t, true)
	held := "queue=" + url.QueryEscape(w.Confirm) + "&group=" + w.HeldGroup
	type tamper struct {
		page, action string
		field, value string
	}
	for _, c := range []tamper{
		{"/forget?key=" + url.QueryEscape(w.StuckKeys[0]), "/forget", "key", w.StuckKeys[1]},
		{"/forget?key=" + url.QueryEscape(w.StuckKeys[0]), "/forget", "token", "another"},
		{"/forget?key=" + url.QueryEscape(w.StuckKeys[0]), "/forget", "status", "COMPLETED"},
		{"/forget?key=" + url.QueryEscape(w.StuckKeys[0]), "/forget", "lease", "1"},
		{"/dlq/preview?queue=orders.fifo&group=acct-9", "/dlq/redrive", "group", "acct-7"},
		{"/dlq/preview?queue=orders.fifo&group=acct-9", "/dlq/redrive", "max", "1000"},
		{"/dlq/preview?queue=orders.fifo&group=acct-9", "/dlq/redrive", "before", "99999999999999"},
		{"/dlq/preview?queue=orders.fifo&group=acct-9", "/dlq/redrive", "queue", w.Queue},
		{"/outbox/release?" + held, "/outbox/release", "group", w.PendingGroup},
		{"/outbox/release?" + held, "/outbox/release", "queue", w.Queue},
		{"/outbox/release?" + held, "/outbox/release", "id", "confirm-1701"},
		{"/outbox/drop?" + held, "/outbox/drop", "id", "confirm-1701"},
		{"/outbox/drop?" + held, "/outbox/drop", "group", w.PendingGroup},
	} {
		f := form(t, mustGet(t, h, c.page))
		f.Set(c.field, c.value)
		code, body := post(t, h, c.action, f)
		require.Equal(t, http.StatusForbidden, code, "%s with %s=%s: %s", c.action, c.field, c.value, body)
		require.Contains(t, body, "this form is stale")
	}
	// A token of one confirmation page with the whole form of another.
	a := form(t, mustGet(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[0])))
	b := form(t, mustGet(t, h, "/forget?key="+url.QueryEscape(w.StuckKeys[1])))
	b.Set("csrf", a.Get("csrf"))
	code, _ := post(t, h, "/forget", b)
	require.Equal(t, http.StatusForbidden, code, "a token for another record")
	// An extra group appended to a redrive form.
	f := form(t, mustGet(t, h, "/dlq/preview?queue=orders.fifo&group=acct-9"))
	f.Add("group", "acct-7")
	code, _ = post(t, h, "/dlq/redrive", f)
	require.Equal(t, http.StatusForbidden, code, "an extra group")

	for _, k := range w.StuckKeys {
		r, err := w.Record(t.Context(), k)
		require.NoError(t, err)
		require.NotNil(t, r, "nothing forgotten")
	}
	n, err := w.DLQDepth(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3, n, "nothing redriven")
	isHeld, err := w.Held(t.Context())
	require.NoError(t, err)
	require.True(t, isHeld, "neither released nor dropped")

	// The tokens were not spent by the refusals: each form as issued works.
	code, body := post(t, h, "/forget", a)
	require.Equal(t, http.StatusOK, code, body)
	code, body = post(t, h, "/dlq/redrive", form(t, mustGet(t, h, "/dlq/preview?queue=orders.fifo&group=acct-9")))
	require.Equal(t, http.StatusOK, code, body)
	code, body = post(t, h, "/outbox/drop", form(t, mustGet(t, h, "/outbox/drop?"+held)))
	require.Equal(t, http.StatusOK, code, body)
}
