package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Sample is a reading of a consumer's counters: what the worker exports on
// /metrics, or the baseline's own counts.
type Sample struct {
	At time.Time
	// Counts by metric: applied, received, duplicates, retries, busy,
	// permanent, leases_lost, receive_errors, batch_failed.
	Counts map[string]float64
	// Requests by "Service.Operation" (every attempt, as AWS bills them).
	Requests map[string]float64
}

// worker metrics read into Sample.Counts.
var counterNames = map[string]string{
	"exactly_effects_applied_total":           "applied",
	"exactly_messages_received_total":         "received",
	"exactly_duplicates_total":                "duplicates",
	"exactly_retries_total":                   "retries",
	"exactly_busy_total":                      "busy",
	"exactly_permanent_failures_total":        "permanent",
	"exactly_leases_lost_total":               "leases_lost",
	"exactly_receive_errors_total":            "receive_errors",
	"exactly_batch_entries_failed_total":      "batch_failed",
	"exactly_dynamodb_write_units_total":      "dynamodb_wru",
	"exactly_bench_group_wait_seconds_total":  "group_wait_seconds",
	"exactly_bench_group_waits_total":         "group_waits",
	"exactly_bench_start_wait_seconds_total":  "start_wait_seconds",
	"exactly_bench_start_waits_total":         "start_waits",
	"exactly_bench_delete_wait_seconds_total": "delete_wait_seconds",
	"exactly_bench_delete_waits_total":        "delete_waits",
	// A paced run's gauges (paced.go).
	"exactly_bench_paced_sent":              "paced_sent",
	"exactly_bench_paced_measured":          "paced_measured",
	"exactly_bench_send_effect_p50_seconds": "send_effect_p50",
	"exactly_bench_send_effect_p99_seconds": "send_effect_p99",
	"exactly_bench_paced_offered_rate":      "paced_offered",
	"exactly_bench_paced_done":              "paced_done",
}

func newSample(at time.Time) Sample {
	return Sample{At: at, Counts: map[string]float64{}, Requests: map[string]float64{}}
}

// parseMetrics reads the Prometheus text format and keeps the counters above
// (summed over their labels) and exactly_aws_requests_total by service and
// operation.
func parseMetrics(r io.Reader, at time.Time) (Sample, error) {
	s := newSample(at)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseLine(line)
		if err != nil {
			return s, err
		}
		if c, ok := counterNames[name]; ok {
			s.Counts[c] += value
		} else if name == "exactly_aws_requests_total" {
			s.Requests[labels["service"]+"."+labels["operation"]] += value
		} else if name == "exactly_bench_held_seconds_total" {
			s.Counts[heldKey(labels["service"]+"."+labels["operation"])] += value
		}
	}
	return s, sc.Err()
}

// parseLine splits `name{a="b",c="d"} value [timestamp]`.
func parseLine(line string) (name string, labels map[string]string, value float64, err error) {
	rest := line
	i := strings.IndexAny(rest, "{ ")
	if i < 0 {
		return "", nil, 0, fmt.Errorf("metrics: cannot parse %q", line)
	}
	name, rest = rest[:i], rest[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", nil, 0, fmt.Errorf("metrics: cannot parse labels of %q", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			i := 0
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[i])
					}
					continue
				}
				val.WriteByte(rest[i])
			}
			if i == len(rest) {
				return "", nil, 0, fmt.Errorf("metrics: unterminated label in %q", line)
			}
			labels[key] = val.String()
			rest = rest[i+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, fmt.Errorf("metrics: no value in %q", line)
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("metrics: bad value in %q: %w", line, err)
	}
	return name, labels, value, nil
}

// sum adds samples of several processes taken at about the same time; At is
// their mean.
func sum(ss []Sample) Sample {
	out := newSample(time.Time{})
	var ns int64
	for _, s := range ss {
		ns += s.At.UnixNano()
		for k, v := range s.Counts {
			out.Counts[k] += v
		}
		for k, v := range s.Requests {
			out.Requests[k] += v
		}
	}
	if len(ss) > 0 {
		out.At = time.Unix(0, ns/int64(len(ss)))
	}
	return out
}

// peakRSS is the Sample.Counts key of the processes' peak resident set
// (bytes, summed over processes): a high-water mark, not a counter.
const peakRSS = "rss_peak_bytes"

// delta is b - a; a high-water mark keeps b's value.
func delta(a, b Sample) Sample {
	out := newSample(b.At)
	for k, v := range b.Counts {
		out.Counts[k] = v - a.Counts[k]
		if k == peakRSS {
			out.Counts[k] = v
		}
	}
	for k, v := range b.Requests {
		if d := v - a.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	return out
}
