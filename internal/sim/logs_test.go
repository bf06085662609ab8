package sim

import (
	"slices"
	"strings"
	"testing"
)

// TestLogsKeptByProcess: with Config.Logs a run keeps its processes' log
// lines, Debug ones included, each named by its process and carrying the
// logger's attributes; without it, none (and the counts of Info lines
// stay as they were).
func TestLogsKeptByProcess(t *testing.T) {
	all, _ := ParseKinds("")
	ops, _ := ParseOps("")
	cfg := Config{Seed: 5, Kinds: all, Ops: ops, Workers: 2, Lambdas: 1}
	off := runSeed(t, cfg)
	if len(off.Logs) != 0 {
		t.Fatalf("%d log lines kept without Config.Logs", len(off.Logs))
	}
	cfg.Logs = true
	on := runSeed(t, cfg)
	if on.Failed() {
		t.Fatalf("violations: %v", on.Violations)
	}
	debug := slices.IndexFunc(on.Logs, func(l string) bool {
		return strings.Contains(l, " DEBUG: ") && strings.Contains(l, " queue=") && strings.Contains(l, " group=")
	})
	if debug < 0 || !strings.HasPrefix(strings.Fields(on.Logs[debug])[1], "w") {
		t.Fatalf("no Debug line of a message, named by its worker process, among %d: %.5q", len(on.Logs), on.Logs)
	}
	if on.Stats["log: commit mode"] != off.Stats["log: commit mode"] || on.Stats["log: commit mode"] == 0 {
		t.Fatalf("Info lines counted %d with logs kept, %d without", on.Stats["log: commit mode"], off.Stats["log: commit mode"])
	}
}

// TestLogsAbout: a red seed's report picks the lines about the groups and
// dedup keys its violations name, and those of a process named before a
// story, and no others.
func TestLogsAbout(t *testing.T) {
	logs := []string{
		"+1s w0.1 DEBUG: done queue=q1 group=g5 dedup_key=sim#q1-orders.fifo#g5#d31",
		"+2s w0.1 DEBUG: done queue=q1 group=g50 dedup_key=sim#q1-orders.fifo#g50#d7",
		"+3s w1.2 WARN: commit failed key=sim#q2-mail.fifo#g2#k9 err=x",
		"+4s w1.2 INFO: shutting down",
		"+5s w2.5 INFO: commit mode",
		"+6s w3.1 INFO: commit mode",
	}
	got := logsAbout(logs, []string{"end: lost: message 31 (q1-orders.fifo, group g5, poison until fixed: false)", "w2.5 committed message 9 (sim#q2-mail.fifo#g2#k9) on a stale read; its story: w3.1 received it"})
	want := []string{logs[0], logs[2], logs[4]}
	if !slices.Equal(got, want) {
		t.Fatalf("picked %q, want %q", got, want)
	}
}
