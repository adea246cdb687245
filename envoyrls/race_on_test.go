//go:build race

package envoyrls

// raceEnabled reports whether the tests run under the race detector, whose
// sync.Pool drops some of what it is given: allocations are counted
// without it.
const raceEnabled = true
