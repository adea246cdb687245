package slidegate

import (
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// numReasons is the number of reasons a request is blocked for, and the
// length of the totals by reason (Totals.BlockedBy).
const numReasons = flowlimits.NumReasons

// A BlockError is the error of a request that a rule blocked. Take it apart
// with errors.As; errors.Is(err, [flow.ErrBlocked]) matches it, as it
// matches every refusal of package flow's limiters.
type BlockError struct {
	// Resource is the resource the request entered.
	Resource string
	// Key is the request's key (WithKey) when a per-key rule blocked it;
	// empty otherwise.
	Key string
	// Rule is the name of the rule that blocked it (FlowRule.Name, or
	// the one Rules.Named gives it: "qps", "breaker").
	Rule string
	// Reason says why: [flow.RateLimited], [flow.BreakerOpen] ...
	Reason flow.Reason
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

// Is reports whether target is [flow.ErrBlocked].
func (e *BlockError) Is(target error) bool { return target == flow.ErrBlocked }
