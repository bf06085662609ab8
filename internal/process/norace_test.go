//go:build !race

package process_test

// raceEnabled: the race detector is on (its instrumentation allocates).
const raceEnabled = false
