// Package clock is slidegate's source of time.
//
// A time is an int64 count of nanoseconds on a monotonic clock. It is read
// once per decision and passed down. Monotonic time never goes backwards.
// It does not jump when NTP or an operator steps the wall clock.
//
// [System] is the real clock. [Manual] moves only when told to. Every
// slidegate type that reads the time takes a [Clock], so tests and
// simulations drive it with a Manual clock instead of sleeping.
//
// docs/clock.md says why the time is monotonic and an int64.
package clock
