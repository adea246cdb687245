//go:build race

package flow

// raceEnabled reports whether the tests run under the race detector, which
// makes them some ten times slower: the heavy ones run smaller.
const raceEnabled = true
