package slidegate

import (
	"errors"
	"time"
)

// ErrBlocked matches every *BlockError with errors.Is.
var ErrBlocked = errors.New("slidegate: blocked")

// A Reason says why a request was blocked.
type Reason uint8

const (
	// RateLimited: a QPS rule's limit is reached.
	RateLimited Reason = iota + 1
	// ConcurrencyLimited: a concurrency rule's limit of requests in flight
	// is reached.
	ConcurrencyLimited
	// WaitTooLong: a throttle (or a borrowing QPS rule) would make the
	// request wait longer than allowed.
	WaitTooLong
	// RefLimited: the rule's associated resource (RefResource) reached the
	// limit.
	RefLimited
	// BreakerOpen: a breaker refused the request.
	BreakerOpen

	numReasons = iota + 1
)

var reasonNames = [...]string{"", "rate limited", "concurrency limited", "wait too long", "associated resource limited", "breaker open"}

// String returns the reason in words ("rate limited").
func (r Reason) String() string {
	if int(r) < len(reasonNames) && r > 0 {
		return reasonNames[r]
	}
	return "unknown reason"
}

// A BlockError is the error of a request that a rule refused. Take it apart
// with errors.As; errors.Is(err, ErrBlocked) matches it.
type BlockError struct {
	// Resource is the resource the request entered.
	Resource string
	// Rule is the rule that refused it: "flow[2]" or "breakers[0]", its
	// index in the Rules in force.
	Rule string
	// Reason says why.
	Reason Reason
	// RetryAfter is when a retry could pass, where the rule knows it (a QPS
	// limit, an open breaker); 0 otherwise.
	RetryAfter time.Duration
}

// Error describes the block.
func (e *BlockError) Error() string {
	s := "slidegate: " + e.Resource + " blocked by " + e.Rule + ": " + e.Reason.String()
	if e.RetryAfter > 0 {
		s += ", retry after " + e.RetryAfter.String()
	}
	return s
}

// Is reports whether target is ErrBlocked.
func (e *BlockError) Is(target error) bool { return target == ErrBlocked }
