package cli_test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// proc is a running worker process whose stderr lines are collected (JSON
// log lines parsed, any other line as {"msg": line}). It is killed when the
// test ends, and its log is shown if the test failed.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []map[string]any
	done chan error // receives the exit error once
	err  *error     // set once it has exited
}

func startProc(t *testing.T, cmd *exec.Cmd, label string) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				rec = map[string]any{"msg": sc.Text()}
			}
			p.mu.Lock()
			p.logs = append(p.logs, rec)
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanned
		err := cmd.Wait()
		p.mu.Lock()
		p.err = &err
		p.mu.Unlock()
		p.done <- err
	}()
	t.Cleanup(func() {
		if p.exited() == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			for _, l := range p.snapshot() {
				t.Logf("%s log: %v", label, l)
			}
		}
	})
	return p
}

func (p *proc) snapshot() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.logs...)
}

// lines returns the log lines whose msg is msg.
func (p *proc) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range p.snapshot() {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// field returns key of the first log line whose msg is msg.
func (p *proc) field(msg, key string) (any, bool) {
	for _, l := range p.lines(msg) {
		v, ok := l[key]
		return v, ok
	}
	return nil, false
}

// exited returns the process's exit error once it has exited, else nil.
func (p *proc) exited() *error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
