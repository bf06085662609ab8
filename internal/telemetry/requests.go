package telemetry

import (
	"context"
	"errors"
	"runtime"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// Requests counts AWS requests by service and operation. Its middleware sits
// after the SDK's retryer, so every attempt counts: what AWS bills.
type Requests struct {
	vec   *prometheus.CounterVec
	units prometheus.Counter

	mu     sync.Mutex
	counts map[[2]string]int64
	wru    int64
}

// NewRequests registers exactly_aws_requests_total{service,operation} on r
// (nil: not exported, only counted).
func NewRequests(r prometheus.Registerer) *Requests {
	q := &Requests{counts: map[[2]string]int64{}}
	q.vec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "exactly", Name: "aws_requests_total",
		Help: "AWS requests sent, by service and operation (every attempt, retries included).",
	}, []string{"service", "operation"})
	q.units = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "exactly", Name: "dynamodb_write_units_total",
		Help: "DynamoDB write request units as AWS bills them on demand, modelled from the requests sent: 1 per item of a PutItem, UpdateItem or DeleteItem, 2 per item of a TransactWriteItems, for items up to 1 KB; counted for writes that succeed or fail a condition (billed too), not for throttled or failed ones.",
	})
	if r != nil {
		r.MustRegister(q.vec, q.units)
	}
	return q
}

// unitsKey carries a request's modelled write units from the Initialize
// step, which sees its parameters, to the Finalize step, run per attempt.
type unitsKey struct{}

// WriteUnits is the write request units AWS bills for a DynamoDB write on
// demand, for items up to 1 KB (ours are): 1 per standard write, 2 per item
// of a transaction; 0 for anything else.
func WriteUnits(params any) int64 {
	switch in := params.(type) {
	case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		return 1
	case *dynamodb.TransactWriteItemsInput:
		return 2 * int64(len(in.TransactItems))
	}
	return 0
}

// billed reports whether a write that ended with err consumed its units:
// it succeeded, or DynamoDB evaluated and refused its condition.
func billed(err error) bool {
	if err == nil {
		return true
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	var tce *ddbtypes.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

// APIOption adds the counting middleware to a client's stack; use it in
// aws.Config.APIOptions or a client's Options.APIOptions.
func (q *Requests) APIOption(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("exactlyWriteUnits",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if n := WriteUnits(in.Parameters); n > 0 {
				ctx = middleware.WithStackValue(ctx, unitsKey{}, n)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After); err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("exactlyCountRequests",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			q.add(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx))
			out, md, err := next.HandleFinalize(ctx, in)
			if n, _ := middleware.GetStackValue(ctx, unitsKey{}).(int64); n > 0 && billed(err) {
				q.units.Add(float64(n))
				q.mu.Lock()
				q.wru += n
				q.mu.Unlock()
			}
			return out, md, err
		}), middleware.After)
}

// WriteUnitsTotal is the write request units counted so far
// (exactly_dynamodb_write_units_total).
func (q *Requests) WriteUnitsTotal() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wru
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
