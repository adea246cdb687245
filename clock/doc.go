// Package clock is slidegate's source of time: monotonic nanoseconds as an
// int64, read once per decision and passed down.
//
// Why not wall time: wall time (time.Now().UnixNano()) jumps when NTP or an
// operator steps the system clock. A sliding window keyed on wall time stops
// counting, or counts twice, after such a step; a limiter built on it stops
// limiting until the clock catches up. Monotonic time never goes backwards and
// never jumps, so a window keyed on it is correct across clock steps.
//
// Why an int64 and not a time.Time: a time.Time is 24 bytes, and time.Now()
// reads both the wall and the monotonic clock. [System] reads only the
// monotonic clock (time.Since of a fixed base), which costs about half as
// much, and an int64 is free to pass, compare and divide.
//
// Every slidegate type that reads the time takes a [Clock], so tests and
// simulations drive it with a [Manual] clock instead of sleeping.
package clock
