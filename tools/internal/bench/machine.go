package bench

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs     int
	CPUModel string
	MemoryGB float64
	Kernel   string
	Go       string
	SQS      string // emulator and version, from scripts/stack status
	DynamoDB string
	Commit   string // git describe --always --dirty of the working tree the worker was built from
}

// ReadMachine reads /proc and asks scripts/stack status (when run from the
// repository) for the emulators' versions.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPUModel: "unknown", SQS: "unknown", DynamoDB: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && fs[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(fs[1], 64)
				m.MemoryGB = kb / (1 << 20)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("scripts/stack", "status").Output(); err == nil || len(out) > 0 {
		m.SQS, m.DynamoDB = parseStackStatus(string(out), m.SQS, m.DynamoDB)
	}
	return m
}

// parseStackStatus reads lines like
// "sqs      up   http://127.0.0.1:9324  fauxqs 2.4.1 (pid 1, started by scripts/stack)".
func parseStackStatus(out, sqsDef, ddbDef string) (sqsV, ddbV string) {
	sqsV, ddbV = sqsDef, ddbDef
	for _, line := range strings.Split(out, "\n") {
		fs := strings.Fields(line)
		if len(fs) < 4 || fs[1] != "up" {
			continue
		}
		v := strings.Join(fs[3:], " ")
		if i := strings.Index(v, " ("); i >= 0 {
			v = v[:i]
		}
		switch fs[0] {
		case "sqs":
			sqsV = v
		case "dynamodb":
			ddbV = v
		}
	}
	return sqsV, ddbV
}

// LoadAvg is the machine's load averages over 1, 5 and 15 minutes, as
// /proc/loadavg gives them ("unknown" without it): printed beside a figure.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fs := strings.Fields(string(b))
	if len(fs) < 3 {
		return "unknown"
	}
	return strings.Join(fs[:3], " ")
}
