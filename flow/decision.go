package flow

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/internal/blocked"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A configError is the error of a bad setting: which one, the value it was
// given, and what is wrong with it. It matches
// [github.com/slidegate/slidegate.ErrInvalidConfig]. Its message reads
// "flow: invalid configuration: limit = -1: must be between 0 and
// 4294967295". Field names the setting as a rules file spells it. When two
// settings disagree, Field names the one judged by the other: the interval
// when it does not divide into the buckets, the warm-up period when it is
// shorter than two intervals or ten buckets, the cold factor when it
// exceeds the limit.
type configError = config.Error

// badLimit is the error of a limit outside [least, 2^32-1].
func badLimit(limit, least int64) *configError {
	return &configError{Pkg: "flow", Field: "limit", Value: limit, Detail: fmt.Sprintf("must be between %d and %d", least, int64(maxLimit))}
}

// A Reason says why a request was blocked, by a limiter of this package or
// by a guard's rule. Package slidegate's Reason is this type, so one set of
// values names every reason, in the metrics and the dashboard too.
type Reason uint8

const (
	// NotBlocked is the Reason of a request allowed.
	NotBlocked Reason = iota
	// RateLimited: the requests allowed in the interval have reached the
	// limit. For a throttle's Allow, the next free place is still to come.
	RateLimited
	// ConcurrencyLimited: the requests in flight have reached the limit.
	ConcurrencyLimited
	// ExceedsLimit: the request asks for more than the limit itself. No
	// amount of waiting can let it through.
	ExceedsLimit
	// WaitTooLong: a throttled request would wait longer than the maximum
	// wait, or its context allows. Or a borrowing request would wait
	// longer than it may.
	WaitTooLong
	// RefLimited: a guard's rule on another resource (its RefResource)
	// found that resource's traffic at the limit.
	RefLimited
	// BreakerOpen: a guard's breaker blocked the request.
	BreakerOpen
	// Overloaded: the service is overloaded. A [Shedder] found as many
	// requests in flight as it completes at its best. Or an [Adaptive]
	// limiter found as many as the limit it has learnt.
	Overloaded

	numReasons = iota
)

// The Reasons the guard and its exporters count by are these:
// flowlimits.NumReasons is their number, a compile error if it is not.
var (
	_ [numReasons - flowlimits.NumReasons]struct{}
	_ [flowlimits.NumReasons - numReasons]struct{}
)

var reasonNames = [numReasons]string{"not blocked", "rate limited", "concurrency limited", "exceeds limit", "wait too long", "associated resource limited", "breaker open", "overloaded"}

var reasonCodes = [numReasons]string{"", "rate_limited", "concurrency_limited", "exceeds_limit", "wait_too_long", "ref_limited", "breaker_open", "overloaded"}

// Code returns the reason as metrics name it, in snake_case:
// "rate_limited". It is "" for NotBlocked and a Reason it does not know.
// The codes are a contract that dashboards and alerts select on, and do
// not change; String is prose, and may be reworded.
func (r Reason) Code() string {
	if int(r) < len(reasonCodes) {
		return reasonCodes[r]
	}
	return ""
}

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
	// Allowed reports whether the request may proceed: at once, or after
	// Wait.
	Allowed bool
	// Reason says why it may not; NotBlocked when Allowed.
	Reason Reason
	// Wait, for an allowed request, is how long the caller must wait
	// before it proceeds. A throttle's reservation may be in the future. A
	// prioritized request may borrow a place in the next bucket. It is 0
	// for every other decision.
	Wait time.Duration
	// RetryAfter, for a blocked request, is how long until a retry could
	// be allowed, if nothing else were allowed meanwhile. It is 0 when no
	// retry can succeed (ExceedsLimit), or the limiter cannot know
	// (ConcurrencyLimited).
	RetryAfter time.Duration
}

var allowed = Decision{Allowed: true}

// ErrBlocked is what every refusal of a request matches with errors.Is. A
// [BlockError] matches it, and so do the guard's
// [github.com/slidegate/slidegate.BlockError] and
// [github.com/slidegate/slidegate/breaker.ErrBlocked].
var ErrBlocked = blocked.Err

// A BlockError is the error of a refused Wait: why, and when a retry could
// succeed (see [Decision]). It matches [ErrBlocked]; take it apart with
// errors.As.
type BlockError struct {
	Reason     Reason
	RetryAfter time.Duration
}

// Is reports whether target is [ErrBlocked].
func (e *BlockError) Is(target error) bool { return target == ErrBlocked }

// Error describes the block: "flow: blocked: wait too long, retry after
// 500ms".
func (e *BlockError) Error() string {
	if e.RetryAfter > 0 {
		return "flow: blocked: " + e.Reason.String() + ", retry after " + e.RetryAfter.String()
	}
	return "flow: blocked: " + e.Reason.String()
}
