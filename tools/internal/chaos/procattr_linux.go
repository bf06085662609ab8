package chaos

import "syscall"

// procAttr puts a worker in its own process group (a Ctrl-C meant for the
// harness does not reach it; the harness stops it) and kills it if the
// harness dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
