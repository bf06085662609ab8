package telemetry

import (
	"context"
	"runtime"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// Requests counts AWS requests by service and operation. Its middleware sits
// after the SDK's retryer, so every attempt counts: what AWS bills.
type Requests struct {
	vec *prometheus.CounterVec

	mu     sync.Mutex
	counts map[[2]string]int64
}

// NewRequests registers exactly_aws_requests_total{service,operation} on r
// (nil: not exported, only counted).
func NewRequests(r prometheus.Registerer) *Requests {
	q := &Requests{counts: map[[2]string]int64{}}
	q.vec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "exactly", Name: "aws_requests_total",
		Help: "AWS requests sent, by service and operation (every attempt, retries included).",
	}, []string{"service", "operation"})
	if r != nil {
		r.MustRegister(q.vec)
	}
	return q
}

// APIOption adds the counting middleware to a client's stack; use it in
// aws.Config.APIOptions or a client's Options.APIOptions.
func (q *Requests) APIOption(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("exactlyCountRequests",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			q.add(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

func (q *Requests) add(service, op string) {
	q.vec.WithLabelValues(service, op).Inc()
	q.mu.Lock()
	q.counts[[2]string{service, op}]++
	q.mu.Unlock()
}

// Count returns how many requests of service and operation were sent
// (operation "" sums the service).
func (q *Requests) Count(service, op string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for k, v := range q.counts {
		if k[0] == service && (op == "" || k[1] == op) {
			n += v
		}
	}
	return n
}

// Snapshot returns a copy of all counts keyed "Service.Operation".
func (q *Requests) Snapshot() map[string]int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int64, len(q.counts))
	for k, v := range q.counts {
		out[k[0]+"."+k[1]] = v
	}
	return out
}

// RegisterBuildInfo registers exactly_build_info{version,go_version} = 1, so
// that a dashboard can tell which build each worker runs.
func RegisterBuildInfo(r prometheus.Registerer, version string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "exactly", Name: "build_info",
		Help: "The worker's build: always 1, with the version and the Go version as labels.",
	}, []string{"version", "go_version"})
	g.WithLabelValues(version, runtime.Version()).Set(1)
	r.MustRegister(g)
}
