package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// WithRetryBudget makes the Collector export what the retry budget b has
// counted ([flow.RetryBudget.Stats]), labelled budget="name". It exports
// the requests and the retries of its interval, and the retries it blocked.
// Give it the budget of a client's httpguard.WithRetry or
// grpcguard.WithRetry.
//
// The names come from the program, not from the network. The Collector's
// registration fails for an empty name, a name longer than
// 256, a name given twice, or a nil b.
func WithRetryBudget(name string, b *flow.RetryBudget) Option {
	return func(o *options) {
		o.budgets = append(o.budgets, namedBudget{name, b})
	}
}

type namedBudget struct {
	name string
	b    *flow.RetryBudget
}

// retries is the descriptors of the retry budgets' families.
type retries struct {
	budgets                         []namedBudget
	requests, retried, blocked, not *prometheus.Desc
	bad                             *prometheus.Desc // set when the budgets given are wrong: fails the registration
}

func newRetries(desc func(name, help string, labels ...string) *prometheus.Desc, budgets []namedBudget) retries {
	r := retries{
		budgets: budgets,
		requests: desc("retry_budget_requests",
			"Original requests a retry budget (metrics.WithRetryBudget) counted in its interval.", "budget"),
		retried: desc("retry_budget_retries",
			"Retries a retry budget allowed in its interval.", "budget"),
		blocked: desc("retry_budget_blocked_total",
			"Retries a retry budget blocked for want of budget.", "budget"),
		not: desc("retry_budget_not_retried_total",
			"Failed attempts a retry budget did not retry because they were a breaker's probe or met an open breaker.", "budget"),
	}
	seen := map[string]bool{}
	for _, nb := range budgets {
		switch {
		case nb.name == "" || len(nb.name) > bounds.MaxNameLength:
			r.bad = prometheus.NewInvalidDesc(fmt.Errorf("metrics: retry budget name %q: must be 1 to %d bytes", nb.name, bounds.MaxNameLength))
		case nb.b == nil:
			r.bad = prometheus.NewInvalidDesc(fmt.Errorf("metrics: retry budget %q is nil", nb.name))
		case seen[nb.name]:
			r.bad = prometheus.NewInvalidDesc(fmt.Errorf("metrics: two retry budgets named %q", nb.name))
		}
		seen[nb.name] = true
	}
	return r
}

func (r *retries) describe(ch chan<- *prometheus.Desc) {
	if r.bad != nil {
		ch <- r.bad
		return
	}
	ch <- r.requests
	ch <- r.retried
	ch <- r.blocked
	ch <- r.not
}

func (r *retries) collect(ch chan<- prometheus.Metric) {
	if r.bad != nil {
		return
	}
	for _, nb := range r.budgets {
		st := flowstate.Retries(nb.b)
		constMetric(ch, r.requests, prometheus.GaugeValue, float64(st.Requests), nb.name)
		constMetric(ch, r.retried, prometheus.GaugeValue, float64(st.Retries), nb.name)
		constMetric(ch, r.blocked, prometheus.CounterValue, float64(st.Blocked), nb.name)
		constMetric(ch, r.not, prometheus.CounterValue, float64(st.NotRetried), nb.name)
	}
}
