//go:build !race

package compare

// raceEnabled reports whether the tests run under the race detector, which
// slows every request down: the long simulations run a smaller scale.
const raceEnabled = false
