// Command chaos tries hard to make the worker double an effect, lose a
// message or break a group's order, and exits non-zero if it does: several
// worker processes against the local stack, killed, frozen and stopped while
// a fault proxy resets connections and drops responses. See internal/chaos;
// `make chaos` runs it against the local stack.
package main

import (
	"os"

	"github.com/exactlyonce/exactly/internal/chaos"
)

func main() { os.Exit(chaos.Main(os.Args[1:], os.Stdout, os.Stderr)) }
