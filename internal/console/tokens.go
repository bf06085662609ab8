package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tokens are the CSRF tokens of the confirmation forms: the form's action,
// its target (the fields of bound[action], as the confirmation page shows
// them), when it was made and a nonce, signed with the process's secret. A
// token is good for one POST to its action, with its target, within its
// TTL: a second submission of the same form is refused (409), as is a
// token of another process, an older one, or one posted with another
// target (403).
type tokens struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	used map[string]time.Time // nonce -> when its token expires
}

func newTokens(secret []byte, ttl time.Duration, now func() time.Time) *tokens {
	return &tokens{secret: secret, ttl: ttl, now: now, used: map[string]time.Time{}}
}

// bound are the fields of each write's form that name its target: a token
// is issued for their values and accepted only with them.
var bound = map[string][]string{
	"/forget":         {"key", "token", "status", "lease"},
	"/dlq/redrive":    {"queue", "group", "before", "max"},
	"/outbox/release": {"queue", "group", "id"},
	"/outbox/drop":    {"queue", "group", "id"},
}

// target is the canonical form of action's bound fields in form (names
// sorted, each field's values in order, URL-encoded).
func target(action string, form url.Values) string {
	t := url.Values{}
	for _, f := range bound[action] {
		if v, ok := form[f]; ok {
			t[f] = v
		}
	}
	return t.Encode()
}

func (t *tokens) mac(action, target, ts, nonce string) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte(action + "\x00" + target + "\x00" + ts + "\x00" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue returns a token for one POST to action with the target form
// names (the bound fields the confirmation page's form carries).
func (t *tokens) issue(action string, form url.Values) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	ts, nonce := strconv.FormatInt(t.now().Unix(), 10), hex.EncodeToString(b[:])
	return ts + "." + nonce + "." + t.mac(action, target(action, form), ts, nonce)
}

// check accepts a token once, for the action and the target it was
// issued for.
func (t *tokens) check(tok, action string, form url.Values) error {
	const stale = "this form is stale or was not made by this console for this target (its CSRF token is missing, expired, from before a restart, or issued for another record, group or message): go back, reload the page and confirm again"
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || !hmac.Equal([]byte(parts[2]), []byte(t.mac(action, target(action, form), parts[0], parts[1]))) {
		return &Error{Code: http.StatusForbidden, Msg: stale}
	}
	secs, err := strconv.ParseInt(parts[0], 10, 64)
	now := t.now()
	expires := time.Unix(secs, 0).Add(t.ttl)
	if err != nil || !now.Before(expires) {
		return &Error{Code: http.StatusForbidden, Msg: stale}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, exp := range t.used {
		if !now.Before(exp) {
			delete(t.used, n)
		}
	}
	if _, ok := t.used[parts[1]]; ok {
		return &Error{Code: http.StatusConflict, Msg: "this form was submitted already (a double click, or the browser sent it again): nothing more was done. The page it led to says what the first submission did; reload the list to see the state now"}
	}
	t.used[parts[1]] = expires
	return nil
}
