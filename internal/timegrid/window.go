package timegrid

import (
	"fmt"
	"time"
)

// MaxBuckets is the most buckets a window may be divided into.
const MaxBuckets = 1 << 16

// A WindowError says which of a window's interval and bucket count is wrong:
// Arg is "interval" or "buckets", Value the value given (a time.Duration or
// an int), and Detail what it must be. The packages that take a window's
// shape from their callers wrap it with their own ErrInvalidConfig.
type WindowError struct {
	Arg    string
	Value  any
	Detail string
}

// Error returns "arg = value: detail".
func (e *WindowError) Error() string { return fmt.Sprintf("%s = %v: %s", e.Arg, e.Value, e.Detail) }

// CheckWindow reports whether an interval divided into the given number of
// buckets is a window a grid can number: buckets in [1, MaxBuckets], the
// interval positive and at most MaxTime, and each bucket a whole number of
// nanoseconds, at least MinWidth. It returns nil for a valid window, else
// the error naming the first argument found wrong; a bucket too narrow is
// the interval's fault, as the bucket count usually has its default. (The
// result is a pointer, not an error, so that callers read its fields
// without a type assertion; compare it with nil before storing it in an
// error.)
func CheckWindow(interval time.Duration, buckets int) *WindowError {
	switch {
	case interval <= 0:
		return &WindowError{"interval", interval, "must be positive"}
	case buckets < 1 || buckets > MaxBuckets:
		return &WindowError{"buckets", buckets, fmt.Sprintf("must be between 1 and %d", MaxBuckets)}
	case interval%time.Duration(buckets) != 0:
		return &WindowError{"interval", interval, fmt.Sprintf("does not divide into %d buckets of whole nanoseconds", buckets)}
	case interval/time.Duration(buckets) < MinWidth:
		return &WindowError{"interval", interval, fmt.Sprintf("%d buckets of %v are narrower than %v", buckets, interval/time.Duration(buckets), MinWidth)}
	case interval > MaxTime:
		return &WindowError{"interval", interval, fmt.Sprintf("must be at most %v", time.Duration(MaxTime))}
	}
	return nil
}
