// Command worker turns SQS's at-least-once delivery into exactly-once effects.
// See docs/CONFIGURATION.md; `worker --help` lists the subcommands.
package main

import (
	"os"

	"github.com/exactlyonce/exactly/worker"
)

func main() { os.Exit(worker.Main(os.Args[1:], nil)) }
