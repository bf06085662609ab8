package console

import (
	"fmt"
	"html/template"
	"time"

	"github.com/exactlyonce/exactly/internal/sqsmsg"
)

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"since": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return now.Sub(t).Round(time.Second).String()
	},
	"dash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"text":  func(b []byte) string { return string(b) },
	"add":   func(a, b int) int { return a + b },
	"qname": sqsmsg.QueueName,
}
