// Package console is worker console: an operator's web console over the
// queues, the dedup table, the dead-letter queues and the outbox. It shows
// and does only what the commands do (package operator for inspect, stuck
// and forget, package redrive for redrive, package outbox for outbox,
// release and drop): one implementation, two faces. Its own code is the
// presentation, and the safety around the writes: read-only unless
// Config.Write, every write a POST carrying a CSRF token (an HMAC of a
// per-process secret) after a confirmation page that shows what will
// change, each write logged, bodies shown only when asked for.
package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/operator"
	"github.com/exactlyonce/exactly/internal/redrive"
	"github.com/exactlyonce/exactly/internal/sqsmsg"
	"github.com/exactlyonce/exactly/outbox"
)

// SQS is what the console calls on SQS: the redrive's calls, and reading
// queues' attributes.
type SQS interface {
	redrive.SQS
	operator.QueueReader
}

// DB is what the console calls on DynamoDB: the dedup table's records and
// description, and the outbox table.
type DB interface {
	operator.RecordsDB
	operator.TableDescriber
	outbox.API
}

// Config of a console.
type Config struct {
	SQS SQS
	DB  DB
	// Queues are the URLs of the queues the workers consume (and whose
	// dead-letter queues the console reads).
	Queues      []string
	DedupTable  string
	OutboxTable string // "": no outbox pages
	Namespace   string // the workers' key namespace (Find a message)
	// Write allows the writes (forget, redrive, release, drop); without
	// it the console only reads.
	Write bool
	// Addr is the address the console listens on (host:port, its port
	// resolved): a request whose Host is neither it, nor localhost or a
	// loopback IP at its port (any IP at its port when Addr's host is
	// unspecified, 0.0.0.0 or ::), nor one of AllowedHosts, is refused
	// (421), so that a web page whose name was re-pointed at this address
	// (DNS rebinding) cannot read a page or post a form. A write whose
	// Origin is not one of those hosts, or that the browser says is
	// cross-site or same-site (Sec-Fetch-Site), is refused (403).
	Addr string
	// AllowedHosts are more names the console answers to: the name a
	// browser reaches it by through a proxy ("console.example.com": at
	// any port; "console.example.com:8443": at that port only).
	AllowedHosts []string
	// User and Password, when set, are asked for (HTTP basic auth) on
	// every request.
	User, Password string
	// Metrics are the URLs of the workers' Prometheus /metrics endpoints,
	// whose rates the overview draws (Run samples them every
	// ScrapeEvery, default 5s, keeping the last 60 intervals).
	Metrics     []string
	ScrapeEvery time.Duration
	Logger      *slog.Logger
	Now         func() time.Time // default time.Now
	// Secret keys the CSRF tokens (default: 32 random bytes, so that a
	// restart makes the forms of the last process stale).
	Secret []byte
	// PageSize bounds every list (default 50); ScanLimit the items one
	// page of the stuck list reads (default 1000).
	PageSize  int
	ScanLimit int32
	// DLQSearch bounds the dead letters Find a message reads to tell
	// whether its message is in its queue's DLQ (default 100; a listing
	// as worker redrive --dry-run makes it: nothing deleted).
	DLQSearch int
	// DLQWait is the long poll of a dead-letter queue's listing (default
	// 0: short polls, so that a page answers at once).
	DLQWait time.Duration
	// TokenTTL is how long a confirmation form stays valid (default 1h).
	TokenTTL time.Duration
}

//go:embed templates/*.html static/*
var assets embed.FS

// Console is the console's http.Handler.
type Console struct {
	cfg    Config
	hosts  hosts
	log    *slog.Logger
	tmpl   map[string]*template.Template
	mux    *http.ServeMux
	tokens *tokens
	rates  *rates
}

// New returns a console, or an error naming what is missing.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.SQS == nil || cfg.DB == nil:
		return nil, errors.New("console: SQS and DB are required")
	case cfg.DedupTable == "":
		return nil, errors.New("console: the dedup table is required")
	}
	hs, err := newHosts(cfg.Addr, cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	for _, q := range cfg.Queues {
		if !strings.Contains(q, "/") {
			return nil, fmt.Errorf("console: queue %q: want its URL", q)
		}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		_, _ = rand.Read(cfg.Secret)
	}
	cfg.PageSize = cmp.Or(cfg.PageSize, 50)
	cfg.ScanLimit = cmp.Or(cfg.ScanLimit, 1000)
	cfg.DLQSearch = cmp.Or(cfg.DLQSearch, 100)
	cfg.TokenTTL = cmp.Or(cfg.TokenTTL, time.Hour)
	cfg.ScrapeEvery = cmp.Or(cfg.ScrapeEvery, 5*time.Second)
	c := &Console{cfg: cfg, hosts: hs, log: cfg.Logger, mux: http.NewServeMux(), tokens: newTokens(cfg.Secret, cfg.TokenTTL, cfg.Now)}
	if len(cfg.Metrics) > 0 {
		c.rates = &rates{urls: cfg.Metrics, client: &http.Client{Timeout: 2 * time.Second}}
	}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) parseTemplates() error {
	pages, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	c.tmpl = map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", p)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", p, err)
		}
		c.tmpl[name] = t
	}
	return nil
}

func (c *Console) routes() {
	static, _ := fs.Sub(assets, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.Handle("GET /{$}", c.page(c.overview))
	c.mux.Handle("GET /find", c.page(c.find))
	c.mux.Handle("GET /dlq", c.page(c.deadLetters))
	c.mux.Handle("GET /dlq/preview", c.page(c.redrivePreview))
	c.mux.Handle("POST /dlq/redrive", c.write(c.redrive))
	c.mux.Handle("GET /stuck", c.page(c.stuck))
	c.mux.Handle("GET /conflicts", c.page(c.conflicts))
	c.mux.Handle("GET /forget", c.page(c.forgetConfirm))
	c.mux.Handle("POST /forget", c.write(c.forget))
	c.mux.Handle("GET /outbox", c.page(c.outbox))
	c.mux.Handle("GET /outbox/group", c.page(c.outboxGroup))
	c.mux.Handle("GET /outbox/release", c.page(c.releaseConfirm))
	c.mux.Handle("POST /outbox/release", c.write(c.release))
	c.mux.Handle("GET /outbox/drop", c.page(c.dropConfirm))
	c.mux.Handle("POST /outbox/drop", c.write(c.drop))
	c.mux.Handle("/", c.page(func(r *http.Request) (string, any, error) {
		return "", nil, &Error{Code: http.StatusNotFound, Msg: "no such page: " + r.URL.Path}
	}))
}

// ServeHTTP refuses a request for another Host, asks for the credentials
// when set, and answers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.hosts.allow(splitHost(r.Host, "80")) {
		http.Error(w, fmt.Sprintf("421: this console does not answer to Host %q (a page whose name was pointed at it?). Open it at http://%s/, or, for the name a proxy forwards or a browser uses, start it with --allowed-host <name>", r.Host, c.cfg.Addr), http.StatusMisdirectedRequest)
		return
	}
	if c.cfg.User != "" || c.cfg.Password != "" {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(c.cfg.User))&subtle.ConstantTimeCompare([]byte(p), []byte(c.cfg.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="exactly console", charset="UTF-8"`)
			http.Error(w, "401: the console asks for its user and password", http.StatusUnauthorized)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin: no referrer leaves the console (its URLs name keys and
	// groups), and its own forms' POSTs carry their Origin.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// Error is an answer other than a page: its status and what to tell the
// operator.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &Error{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &Error{Code: http.StatusNotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &Error{Code: http.StatusConflict, Msg: fmt.Sprintf(format, args...)}
}

// view is what every page's template gets.
type view struct {
	Title string
	Nav   string
	Write bool
	Data  any
	Err   *Error
	Now   time.Time
}

type handler func(r *http.Request) (tmpl string, data any, err error)

// page renders a handler's template; an error becomes an error page with
// its status (an AWS error a 502), never a stack.
func (c *Console) page(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("console: handler panicked", "path", r.URL.Path, "panic", fmt.Sprint(p))
				c.render(w, r, http.StatusInternalServerError, "error", nil, &Error{Code: http.StatusInternalServerError, Msg: "the console failed on this page (the log says why)"})
			}
		}()
		name, data, err := h(r)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				if errors.Is(err, context.Canceled) {
					return
				}
				c.log.Warn("console: page failed", "path", r.URL.Path, "err", err)
				e = &Error{Code: http.StatusBadGateway, Msg: err.Error()}
			}
			c.render(w, r, e.Code, "error", nil, e)
			return
		}
		c.render(w, r, http.StatusOK, name, data, nil)
	})
}

// write is page for a POST: refused without Config.Write, from another
// origin, or without a valid CSRF token for its action and target (403),
// or when its form was submitted already (409).
func (c *Console) write(h handler) http.Handler {
	return c.page(func(r *http.Request) (string, any, error) {
		if !c.cfg.Write {
			return "", nil, &Error{Code: http.StatusForbidden, Msg: "the console is read-only: start it with --write to change anything"}
		}
		if err := c.sameOrigin(r); err != nil {
			return "", nil, err
		}
		if err := r.ParseForm(); err != nil {
			return "", nil, badRequest("cannot read the form: %v", err)
		}
		if err := c.tokens.check(r.PostForm.Get("csrf"), r.URL.Path, r.PostForm); err != nil {
			return "", nil, err
		}
		return h(r)
	})
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, data any, e *Error) {
	t := c.tmpl[name]
	if t == nil {
		t = c.tmpl["error"]
	}
	v := view{Title: titles[name], Nav: name, Write: c.cfg.Write, Data: data, Err: e, Now: c.cfg.Now()}
	if e != nil {
		v.Title = http.StatusText(e.Code)
	}
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		c.log.Error("console: template failed", "page", name, "err", err)
		http.Error(w, "the console failed to render this page (the log says why)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}

var titles = map[string]string{
	"overview": "Overview", "find": "Find a message", "dlq": "Dead letters", "dlqs": "Dead letters", "preview": "Redrive: preview",
	"redriven": "Redrive: done", "stuck": "Stuck records", "conflicts": "Conflicts", "forget": "Forget a record", "forgotten": "Forgotten",
	"outbox": "Outbox", "group": "Outbox group", "release": "Release a held group", "drop": "Drop a held message", "done": "Done",
}

// queue returns the configured queue a request names (by URL or name).
func (c *Console) queue(r *http.Request) (string, error) {
	q := strings.TrimSpace(r.FormValue("queue"))
	if q == "" {
		return "", badRequest("which queue? give queue=<its name or URL>")
	}
	for _, u := range c.cfg.Queues {
		if u == q || sqsmsg.QueueName(u) == q {
			return u, nil
		}
	}
	return "", notFound("queue %q is not one the console was given (it knows %s)", q, strings.Join(names(c.cfg.Queues), ", "))
}

func names(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = sqsmsg.QueueName(u)
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func (c *Console) groups(r *http.Request) []string {
	var out []string
	for _, g := range r.Form["group"] {
		if g = strings.TrimSpace(g); g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// hosts are the Hosts the console answers to (Config.Addr).
type hosts struct {
	host, port  string
	unspecified bool        // Addr's host is 0.0.0.0 or ::
	allowed     [][2]string // Config.AllowedHosts: host, and port or ""
}

func newHosts(addr string, allowed []string) (hosts, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p == "" || p == "0" {
		return hosts{}, fmt.Errorf("console: Addr %q: want the host:port it listens on (its port resolved): every request's Host is checked against it", addr)
	}
	hs := hosts{host: strings.ToLower(h), port: p}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() || h == "" {
		hs.unspecified = true
	}
	for _, a := range allowed {
		if err := CheckAllowedHost(a); err != nil {
			return hosts{}, fmt.Errorf("console: %w", err)
		}
		ah, ap := splitHost(a, "")
		hs.allowed = append(hs.allowed, [2]string{ah, ap})
	}
	return hs, nil
}

// CheckAllowedHost says what is wrong with h as one of
// Config.AllowedHosts: a name, or name:port, as a browser sends it in Host.
func CheckAllowedHost(h string) error {
	name, _ := splitHost(h, "")
	if name == "" || strings.ContainsAny(h, "/@?# ") {
		return fmt.Errorf("allowed host %q: want a name or name:port as a browser sends it in Host (console.example.com, console.example.com:8443)", h)
	}
	return nil
}

// splitHost splits a Host (or an Origin's host) into its lowercased name
// and its port, defaultPort when it names none.
func splitHost(hostport, defaultPort string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h), cmp.Or(p, defaultPort)
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")), defaultPort
}

// allow says whether the console answers to host at port: an allowed
// name (at its port when it gives one), else at the console's port its
// own address, localhost, a loopback IP, or, listening on every address,
// any IP. A page that re-points its own name at the console (DNS
// rebinding) sends that name, never an IP.
func (hs hosts) allow(host, port string) bool {
	if host == "" {
		return false
	}
	for _, a := range hs.allowed {
		if host == a[0] && (a[1] == "" || a[1] == port) {
			return true
		}
	}
	if port != hs.port {
		return false
	}
	if host == hs.host || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || hs.unspecified)
}

// sameOrigin refuses a write a browser sent from another page: an Origin
// that is not one the console answers to, or a Sec-Fetch-Site other than
// same-origin ("null" only with same-origin). A request with neither header (curl, a script) is no
// browser's, so no cross-site forgery: it goes on to the token check.
func (c *Console) sameOrigin(r *http.Request) error {
	refuse := func(why string) error {
		return &Error{Code: http.StatusForbidden, Msg: "this write was not sent by the console's own pages (" + why + "): nothing was done. Open the console at its own address and confirm there"}
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return refuse("the browser says it came from a " + s + " page")
	}
	o := r.Header.Get("Origin")
	if o == "" || (o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin") {
		// A browser that hides the origin (a stricter referrer policy
		// than the console's) still says where the form came from.
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return refuse(fmt.Sprintf("Origin %q", o))
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	if !c.hosts.allow(splitHost(u.Host, def)) {
		return refuse(fmt.Sprintf("Origin %q", o))
	}
	return nil
}
