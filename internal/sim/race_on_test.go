//go:build race

package sim

// raceOn: the race detector's instrumentation reorders the goroutines of a
// process more often (TestSeedsReplay).
const raceOn = true
