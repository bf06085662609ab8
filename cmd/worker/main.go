// Command worker turns SQS's at-least-once delivery into exactly-once effects.
// See docs/CONFIGURATION.md; `worker --help` lists the subcommands.
package main

import (
	"os"

	// The release image is an empty base with the binary alone (no CA
	// bundle): the binary carries Mozilla's root certificates, used only
	// where the system has none, for TLS to AWS. scripts/distcheck checks
	// that every released binary links them.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/exactlyonce/exactly/worker"
)

func main() { os.Exit(worker.Main(os.Args[1:], nil)) }
