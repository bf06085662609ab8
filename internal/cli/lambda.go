package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/exactlyonce/exactly"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/sqsevent"
	"github.com/exactlyonce/exactly/internal/telemetry"
)

// DefaultLambdaConcurrency bounds the message groups of one batch handled at
// once on Lambda (a FIFO batch holds at most 10 messages).
const DefaultLambdaConcurrency = sqsevent.DefaultConcurrency

// runtimeAPIEnv is set by Lambda for the function's process.
const runtimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

func newLambdaSet(s *settings, lookup func(string) (string, bool)) *config.Set {
	fs := config.NewSet("worker lambda", nil, lookup)
	s.define(fs, true)
	return fs
}

// startLambda hands the handler to aws-lambda-go's runtime loop, which talks
// to the Runtime API at AWS_LAMBDA_RUNTIME_API and never returns. Tests of
// the init path replace it.
var startLambda = func(ctx context.Context, handler any) {
	awslambda.StartWithOptions(handler, awslambda.WithContext(ctx))
}

// lambdaCommand is the function's init: everything that can be wrong with
// the configuration fails here, once per cold start, with one line (and an
// init error posted to the Runtime API, which Lambda shows as the cause).
func lambdaCommand(ctx context.Context, effects Effects, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	h, stop, err := initLambda(ctx, effects, args, stdout, stderr, lookup)
	if err != nil {
		if api, _ := lookup(runtimeAPIEnv); api != "" && !errors.Is(err, flag.ErrHelp) {
			reportInitError(ctx, api, err)
		}
		return err
	}
	// The runtime loop returns only when ctx ends: the process is
	// stopping, and the tracer's exporter goes with it.
	defer stop()
	startLambda(ctx, h)
	return nil
}

// lambdaHandler is the function's handler.
type lambdaHandler = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// initLambda builds the handler, and stop, which ends what it started (the
// tracer provider's exporter, the clients' connections).
func initLambda(ctx context.Context, effects Effects, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) (_ lambdaHandler, _ func(), err error) {
	s := settings{effects: effects}
	fs := newLambdaSet(&s, lookup)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if err := s.validate(fs, true); err != nil {
		return nil, nil, err
	}
	if api, _ := lookup(runtimeAPIEnv); api == "" {
		return nil, nil, config.Errorf("worker lambda serves AWS Lambda's Runtime API, but %s is not set: deploy the binary as a Lambda function's bootstrap (on ECS or any host, use worker run)", runtimeAPIEnv)
	}
	log, err := telemetry.NewLogger(stderr, s.logFormat, s.logLevel)
	if err != nil {
		return nil, nil, config.Errorf("%s", err)
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			cl.close() // no handler: nothing uses the clients
		}
	}()
	eff, err := buildEffect(s, cl, log, lookup)
	if err != nil {
		return nil, nil, err
	}
	tp, err := tracing(ctx, lookup)
	if err != nil {
		return nil, nil, err
	}
	cfg := s.config(cl, eff, log, nil)
	if tp != nil {
		cfg.TracerProvider = tp
	}
	if s.metricsFormat == "emf" {
		cfg.EMF.Writer = stdout // Lambda's log: CloudWatch extracts the metrics
	}
	h, err := exactly.NewLambdaHandler(ctx, cfg)
	if err != nil {
		shutdownTracing(tp, log)
		return nil, nil, cliError(fs, err)
	}
	handle := h.Handle
	if tp != nil {
		handle = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			resp, err := h.Handle(ctx, ev)
			// Lambda may freeze the environment once the invocation has
			// answered: the batch's spans go now.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if ferr := tp.ForceFlush(fctx); ferr != nil {
				log.Warn("cannot flush the batch's spans", "err", ferr)
			}
			cancel()
			return resp, err
		}
	}
	scope := s.dedupScope
	if scope == "" {
		scope = "queue"
	}
	log.Info("lambda worker ready", "version", Version, "effect", s.effect, "table", s.table,
		"queues", strings.Join(s.queueNames(), ","), "dedup_scope_default", scope, "fifo_fail_rest", s.fifoFailRest,
		"concurrency", s.concurrency, "dedup_key", s.dedupKey, "payload_hash", s.payloadHash, "dedup_ttl_ms", s.dedupTTL.Milliseconds(), "move_to_dlq", s.moveToDLQ,
		"tracing", tp != nil)
	return handle, func() { shutdownTracing(tp, log); cl.close() }, nil
}

// reportInitError tells the Runtime API why init failed; Lambda then reports
// it as the invocation's error. Best effort: the process exits non-zero anyway.
func reportInitError(ctx context.Context, api string, err error) {
	kind, errType := "Runtime.InitError", "InitError"
	var cerr *config.Error
	if errors.As(err, &cerr) {
		kind, errType = "Runtime.ConfigInvalid", "ConfigError"
	}
	body, _ := json.Marshal(map[string]any{"errorMessage": "worker: " + err.Error(), "errorType": errType, "stackTrace": []string{}})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if rerr != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", kind)
	// The Runtime API is local to the sandbox: never through a proxy.
	resp, rerr := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if rerr != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close() // nothing to report
}
