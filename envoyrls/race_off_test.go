//go:build !race

package envoyrls

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
