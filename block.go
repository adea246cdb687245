package slidegate

import (
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// ErrBlocked matches every refusal with errors.Is: a *BlockError, and the
// refusals of the limiters of package flow used on their own
// (flow.ErrBlocked, the same value).
var ErrBlocked = flow.ErrBlocked

// A Reason says why a request was blocked: flow.Reason, whose values every
// package, the metrics and the dashboard share.
type Reason = flow.Reason

// The reasons a guard blocks a request for (flow.Reason's).
const (
	// RateLimited: a QPS rule's limit is reached.
	RateLimited = flow.RateLimited
	// ConcurrencyLimited: a concurrency rule's limit of requests in flight
	// is reached.
	ConcurrencyLimited = flow.ConcurrencyLimited
	// ExceedsLimit: the request (a batch, WithCount) asks for more than a
	// rule's limit itself, so no retry can be allowed.
	ExceedsLimit = flow.ExceedsLimit
	// WaitTooLong: a throttle (or a borrowing QPS rule) would make the
	// request wait longer than allowed.
	WaitTooLong = flow.WaitTooLong
	// RefLimited: the rule's associated resource (RefResource) reached the
	// limit.
	RefLimited = flow.RefLimited
	// BreakerOpen: a breaker blocked the request.
	BreakerOpen = flow.BreakerOpen
	// Overloaded: a shed rule found the service overloaded, or an
	// adaptive rule its limit reached.
	Overloaded = flow.Overloaded

	numReasons = flowlimits.NumReasons
)

// A BlockError is the error of a request that a rule blocked. Take it apart
// with errors.As; errors.Is(err, ErrBlocked) matches it.
type BlockError struct {
	// Resource is the resource the request entered.
	Resource string
	// Key is the request's key (WithKey) when a per-key rule blocked it;
	// empty otherwise.
	Key string
	// Rule is the name of the rule that blocked it (FlowRule.Name, or
	// the one Rules.Named gives it: "qps", "breaker").
	Rule string
	// Reason says why.
	Reason Reason
	// RetryAfter is when a retry could be allowed, where the rule knows it (a QPS
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
