//go:build !race

package httpguard_test

// raceDetector reports whether the tests run under the race detector, under
// which sync.Pool (which the guard's entries come from) drops a share of
// what is put back.
const raceDetector = false
