//go:build !race

package flow

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
