package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/console"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// consoleSettings are worker console's settings.
type consoleSettings struct {
	addr, authFile, table, outboxTable, namespace string
	queues, metrics, allowedHosts                 []string
	write                                         bool
	logFormat, logLevel                           string
}

func (s *consoleSettings) define(fs *config.Set) {
	fs.String(&s.addr, "addr", "WORKER_CONSOLE_ADDR", "127.0.0.1:8080", "address to listen on: loopback only, unless --auth-file is given too")
	fs.String(&s.authFile, "auth-file", "WORKER_CONSOLE_AUTH_FILE", "", "file holding user:password, asked for on every request (HTTP basic auth); required to listen beyond loopback. Put a TLS proxy in front of it off this machine")
	fs.Bool(&s.write, "write", "WORKER_CONSOLE_WRITE", false, "allow the writes (redrive, forget, outbox release and drop), each after a confirmation page; without it the console only reads")
	fs.List(&s.queues, "queue", "WORKER_QUEUES", "URL of a queue the workers consume (its dead-letter queue comes from its redrive policy)")
	fs.Alias("queues", "queue")
	fs.List(&s.allowedHosts, "allowed-host", "WORKER_CONSOLE_ALLOWED_HOSTS", "a name the console answers to besides its address, localhost and loopback IPs at its port: the Host a proxy in front of it forwards, or the name browsers use (name: at any port; name:port: at that port)")
	fs.List(&s.metrics, "metrics", "WORKER_CONSOLE_METRICS", "URLs of the workers' Prometheus /metrics endpoints (comma-separated): the overview draws their rates")
	fs.String(&s.table, "table", "WORKER_DEDUP_TABLE", DefaultDedupTable, "DynamoDB dedup table")
	fs.String(&s.outboxTable, "outbox-table", "WORKER_OUTBOX_TABLE", "", "DynamoDB outbox table (empty: no outbox pages)")
	fs.String(&s.namespace, "namespace", "WORKER_NAMESPACE", DefaultNamespace, "first part of every dedup key (to find a message as the worker keys it)")
	fs.String(&s.logFormat, "log-format", "WORKER_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal)")
	fs.String(&s.logLevel, "log-level", "WORKER_LOG_LEVEL", "info", "debug, info, warn or error")
}

// consoleAuth checks the address against the authentication setting and
// reads the credentials.
func (s *consoleSettings) auth(fs *config.Set, read func(string) ([]byte, error)) (user, pass string, err error) {
	host, _, err := net.SplitHostPort(s.addr)
	if err != nil {
		return "", "", config.Errorf("%s %q: want host:port (127.0.0.1:8080)", fs.Name("addr"), s.addr)
	}
	if s.authFile == "" {
		if !loopback(host) {
			return "", "", config.Errorf("%s %s is not a loopback address: give %s (a file holding user:password) to listen there", fs.Name("addr"), s.addr, fs.Name("auth-file"))
		}
		return "", "", nil
	}
	b, err := read(s.authFile)
	if err != nil {
		return "", "", config.Errorf("%s: %v", fs.Name("auth-file"), err)
	}
	user, pass, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok || user == "" || len(pass) < 12 {
		return "", "", config.Errorf("%s %s: want one line user:password, the password at least 12 characters", fs.Name("auth-file"), s.authFile)
	}
	return user, pass, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// consoleCommand serves the operator console (internal/console).
func consoleCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var s consoleSettings
	fs := config.NewSet("worker console", stderr, lookup)
	s.define(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	user, pass, err := s.auth(fs, os.ReadFile)
	if err != nil {
		return err
	}
	for _, h := range s.allowedHosts {
		if err := console.CheckAllowedHost(h); err != nil {
			return config.Errorf("%s: %v", fs.Name("allowed-host"), err)
		}
	}
	log, err := telemetry.NewLogger(stderr, s.logFormat, s.logLevel)
	if err != nil {
		return config.Errorf("%s", err)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return config.Errorf("%s %q: %v", fs.Name("addr"), s.addr, err)
	}
	defer func() { _ = ln.Close() }()
	c, err := console.New(console.Config{Addr: ln.Addr().String(), AllowedHosts: s.allowedHosts, SQS: cl.sqs, DB: cl.dynamo, Queues: s.queues,
		DedupTable: s.table, OutboxTable: s.outboxTable, Namespace: s.namespace, Write: s.write, User: user, Password: pass, Metrics: s.metrics, Logger: log})
	if err != nil {
		return config.Errorf("%s", err)
	}
	mode := "read-only"
	if s.write {
		mode = "read-write"
	}
	fmt.Fprintf(stdout, "console: http://%s/ (%s)\n", ln.Addr(), mode)
	log.Info("console started", "addr", ln.Addr().String(), "write", s.write, "auth", user != "", "allowed_hosts", strings.Join(s.allowedHosts, ","), "queues", len(s.queues), "dedup_table", s.table, "outbox_table", s.outboxTable)
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); c.Run(sampling) }()
	defer func() { stopSampling(); <-sampled }()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("console stopped")
	return nil
}
