package flow

import (
	"errors"
	"time"
)

// ErrInvalidConfig is wrapped by every error a constructor returns for a bad
// argument. The message names the argument and its value.
var ErrInvalidConfig = errors.New("flow: invalid configuration")

// A Reason says why a request was blocked: by a limiter of this package, or
// by one of a guard's rules (package slidegate, whose Reason is this type),
// so that one set of values names every reason in every package, the
// metrics and the dashboard.
type Reason uint8

const (
	// NotBlocked is the Reason of a request that passed.
	NotBlocked Reason = iota
	// RateLimited: the requests admitted in the interval have reached the
	// limit.
	RateLimited
	// ConcurrencyLimited: the requests in flight have reached the limit.
	ConcurrencyLimited
	// ExceedsLimit: the request asks for more than the limit itself, so no
	// amount of waiting can admit it.
	ExceedsLimit
	// WaitTooLong: a throttled request would have to wait longer than the
	// throttle's maximum wait, or than its context allows; or a borrowing
	// request longer than it may borrow.
	WaitTooLong
	// RefLimited: a guard's rule on another resource (its RefResource)
	// found that resource's traffic at the limit.
	RefLimited
	// BreakerOpen: a guard's breaker blocked the request.
	BreakerOpen

	// NumReasons is the number of Reasons, NotBlocked included: an array
	// indexed by Reason has NumReasons elements.
	NumReasons = iota
)

var reasonNames = [NumReasons]string{"not blocked", "rate limited", "concurrency limited", "exceeds limit", "wait too long", "associated resource limited", "breaker open"}

// String returns the reason in words ("rate limited").
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown reason"
}

// A Decision is a limiter's answer to one request. It is a small value;
// deciding allocates nothing.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Reason says why it may not; NotBlocked when Allowed.
	Reason Reason
	// Wait, for an admitted request, is how long the caller must wait before
	// it proceeds: a Throttle admits requests into evenly spaced places, some
	// of them in the future. It is 0 for the other limiters.
	Wait time.Duration
	// RetryAfter, for a refused request, is how long from the decision's
	// time until a retry could be admitted if nothing else were admitted
	// meanwhile. It is 0 when no retry can succeed (ExceedsLimit) or when
	// the limiter cannot know (ConcurrencyLimited).
	RetryAfter time.Duration
}

// A Limiter decides whether requests may proceed. QPS and Concurrency are
// Limiters.
type Limiter interface {
	// AllowNAt decides whether n requests arriving at time now (nanoseconds
	// on the limiter's clock) may proceed, and if so counts them.
	AllowNAt(now int64, n int64) Decision
}

var allowed = Decision{Allowed: true}

// A BlockError is the error of a refused Wait: why, and when a retry could
// succeed (see Decision). Take it apart with errors.As.
type BlockError struct {
	Reason     Reason
	RetryAfter time.Duration
}

// Error describes the refusal.
func (e *BlockError) Error() string {
	if e.RetryAfter > 0 {
		return "flow: refused: " + e.Reason.String() + ", retry after " + e.RetryAfter.String()
	}
	return "flow: refused: " + e.Reason.String()
}
