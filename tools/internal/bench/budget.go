package bench

import (
	"fmt"
	"html"
	"strings"
)

// The cost model's prices: AWS's published on-demand prices in us-east-1,
// as the pricing pages gave them in November 2026. SQS: FIFO requests
// $0.50 per million (each 64 KB chunk of a payload is a request; the
// benchmark's messages are far smaller), after the free tier. DynamoDB
// on demand: $0.625 per million write request units (since the November
// 2024 reduction); a standard write of an item up to 1 KB is 1 unit, a
// transactional one 2 (exactly_dynamodb_write_units_total models them).
const (
	SQSFIFOPerMillion     = 0.50
	DynamoDBWRUPerMillion = 0.625
)

// Budget is what one message costs a consumer, the way AWS bills it.
type Budget struct {
	SQSRequests float64 // SQS requests per message
	WriteUnits  float64 // DynamoDB write request units per message
}

// Budget of a window's messages.
func (s Sample) Budget() (Budget, bool) {
	n := s.Counts["applied"]
	if n <= 0 {
		return Budget{}, false
	}
	return Budget{SQSRequests: perMessage(s, "SQS"), WriteUnits: s.Counts["dynamodb_wru"] / n}, true
}

// PerMillion is the modelled cost of a million messages, in US dollars:
// SQS and DynamoDB.
func (b Budget) PerMillion() (sqs, dynamo float64) {
	return b.SQSRequests * SQSFIFOPerMillion, b.WriteUnits * DynamoDBWRUPerMillion
}

// budgetTable: per saturated run, requests and write units per message and
// the modelled cost of a million messages, with the ratio to the baseline
// at the same concurrency.
func (r *Result) budgetTable() *table {
	t := &table{head: []string{"consumer", "conc/proc", "SQS req/msg", "DynamoDB WRU/msg", "$ per million msgs: SQS", "DynamoDB", "total", "× baseline (same conc)"}}
	base := map[int]float64{}
	for _, d := range r.Drains() {
		if b, ok := d.Window.Budget(); ok && d.Consumer == "baseline" {
			s, db := b.PerMillion()
			base[d.Conc] = s + db
		}
	}
	for _, d := range r.Drains() {
		b, ok := d.Window.Budget()
		if !ok {
			continue
		}
		s, db := b.PerMillion()
		vs := "-"
		if d.Consumer != "baseline" {
			vs = ratio(s+db, base[d.Conc])
		}
		t.add(label(d.Consumer, d.Procs), fmt.Sprint(d.Conc), fmt.Sprintf("%.3f", b.SQSRequests), fmt.Sprintf("%.2f", b.WriteUnits),
			fmt.Sprintf("%.3f", s), fmt.Sprintf("%.3f", db), fmt.Sprintf("%.3f", s+db), vs)
	}
	return t
}

// BudgetChartFile is the cost chart's file name, written beside the report.
const BudgetChartFile = "bench-budget.svg"

// BudgetChart draws the modelled cost of a million messages per consumer at
// the highest concurrency, SQS and DynamoDB stacked, as SVG bars.
func BudgetChart(r *Result) string {
	const width, rowH, left, right, top = 760, 34, 170, 150, 40
	conc := 0
	for _, d := range r.Drains() {
		conc = max(conc, d.Conc)
	}
	type bar struct {
		name        string
		sqs, dynamo float64
	}
	var bars []bar
	most := 0.0
	for _, d := range r.Drains() {
		b, ok := d.Window.Budget()
		if !ok || d.Conc != conc {
			continue
		}
		s, db := b.PerMillion()
		bars = append(bars, bar{label(d.Consumer, d.Procs), s, db})
		most = max(most, s+db)
	}
	height := top + rowH*len(bars) + 40
	var w strings.Builder
	fmt.Fprintf(&w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&w, `<text x="%d" y="22" font-size="14">Modelled AWS cost of a million messages (US$, on demand, us-east-1), concurrency %d</text>`+"\n", left, conc)
	scale := 0.0
	if most > 0 {
		scale = float64(width-left-right) / most
	}
	for i, b := range bars {
		y := top + i*rowH
		fmt.Fprintf(&w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+16, html.EscapeString(b.name))
		fmt.Fprintf(&w, `<rect x="%d" y="%d" width="%.1f" height="22" fill="#ff7f0e"/>`+"\n", left, y, b.sqs*scale)
		fmt.Fprintf(&w, `<rect x="%.1f" y="%d" width="%.1f" height="22" fill="#1f77b4"/>`+"\n", float64(left)+b.sqs*scale, y, b.dynamo*scale)
		fmt.Fprintf(&w, `<text x="%.1f" y="%d">$%.3f</text>`+"\n", float64(left)+(b.sqs+b.dynamo)*scale+6, y+16, b.sqs+b.dynamo)
	}
	ly := top + rowH*len(bars) + 16
	fmt.Fprintf(&w, `<rect x="%d" y="%d" width="12" height="12" fill="#ff7f0e"/><text x="%d" y="%d">SQS FIFO requests</text>`+"\n", left, ly, left+18, ly+11)
	fmt.Fprintf(&w, `<rect x="%d" y="%d" width="12" height="12" fill="#1f77b4"/><text x="%d" y="%d">DynamoDB write request units</text>`+"\n", left+170, ly, left+188, ly+11)
	w.WriteString("</svg>\n")
	return w.String()
}
