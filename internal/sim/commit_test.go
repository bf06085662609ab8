package sim

import (
	"flag"
	"fmt"
	"runtime/debug"
)

var flagCommit = flag.String("sim.commit", "", "the commit under test, printed with a red seed as seed@commit (the Makefile passes git rev-parse --short HEAD; else the build's vcs.revision)")

// commit names the code under test: -sim.commit, else the revision the
// build stamped (go test does not stamp one; a built binary does), else "?".
func commit() string {
	if *flagCommit != "" {
		return *flagCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 7 {
			rev = rev[:7]
		}
		if rev != "" && dirty {
			rev += "+dirty"
		}
		if rev != "" {
			return rev
		}
	}
	return "?"
}

// seedAt is a red seed's name: seed@commit.
func seedAt(seed uint64) string { return fmt.Sprintf("%d@%s", seed, commit()) }
