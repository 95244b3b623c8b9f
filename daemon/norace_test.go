//go:build !race

package daemon

// raceEnabled: the race detector is on (its runtime inflates the heap).
const raceEnabled = false
