package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every Linux the project runs on.
const clockTicks = 100

// procStats reads a process's CPU time (user + system, seconds) and peak
// resident set (VmHWM, bytes) from /proc.
func procStats(pid int) (cpu, peakRSS float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	if cpu, err = parseStatCPU(b); err != nil {
		return 0, 0, err
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return cpu, parsePeakRSS(st), nil
}

// parseStatCPU returns utime+stime in seconds from a /proc/<pid>/stat line;
// the command name in parentheses may hold spaces.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cannot parse /proc stat %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3 of the line, utime 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("cannot parse /proc stat %q", b)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cannot parse /proc stat %q", b)
	}
	return (u + s) / clockTicks, nil
}

// parsePeakRSS returns VmHWM in bytes from /proc/<pid>/status (0 if absent).
func parsePeakRSS(b []byte) float64 {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v * 1024
			}
		}
	}
	return 0
}
