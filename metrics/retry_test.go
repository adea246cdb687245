package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/metrics"
)

// retryFamilies are the families of the retry budgets, without the
// namespace.
var retryFamilies = []string{"retry_budget_requests", "retry_budget_retries", "retry_budget_blocked_total", "retry_budget_not_retried_total"}

func TestRetryBudgetsAreExported(t *testing.T) {
	clk := clock.NewManual(start)
	b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.5, MinPerSecond: 1, Interval: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		b.Request()
	}
	for range 20 { // 0.5 × 10 and a floor of 1 a second for 10 s: 15 allowed
		b.Retry(flow.AttemptFailed)
	}
	b.Retry(flow.AttemptProbe)
	st := flowstate.Retries(b)
	f := newScraper(t, metrics.NewCollector(newGuard(t), metrics.WithRetryBudget("payments", b))).scrape(t)
	for _, c := range []struct {
		family string
		want   int64
	}{
		{"slidegate_retry_budget_requests", st.Requests},
		{"slidegate_retry_budget_retries", st.Retries},
		{"slidegate_retry_budget_blocked_total", st.Blocked},
		{"slidegate_retry_budget_not_retried_total", st.NotRetried},
	} {
		if got := f.value(t, c.family, labels("budget", "payments")); got != float64(c.want) {
			t.Errorf("%s = %v, want %d", c.family, got, c.want)
		}
	}
	if st.Requests != 10 || st.Retries != 15 || st.Blocked != 5 || st.NotRetried != 1 {
		t.Fatalf("the budget's stats %+v, want 10 requests, 15 retries (0.5 × 10 + a floor of 10), 5 blocked, 1 not retried", st)
	}
}

func TestRetryBudgetsGivenWrongFailTheRegistration(t *testing.T) {
	b, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10, Interval: 10 * time.Second})
	for _, c := range []struct {
		opts []metrics.Option
		want string
	}{
		{[]metrics.Option{metrics.WithRetryBudget("a", nil)}, `retry budget "a" is nil`},
		{[]metrics.Option{metrics.WithRetryBudget("", b)}, `retry budget name "": must be 1 to 256 bytes`},
		{[]metrics.Option{metrics.WithRetryBudget(strings.Repeat("x", 257), b)}, `must be 1 to 256 bytes`},
		{[]metrics.Option{metrics.WithRetryBudget("a", b), metrics.WithRetryBudget("a", b)}, `two retry budgets named "a"`},
	} {
		err := prometheus.NewPedanticRegistry().Register(metrics.NewCollector(newGuard(t), c.opts...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("register: %v, want an error saying %s", err, c.want)
		}
	}
}

func TestRetryBudgetLintFindsNoProblems(t *testing.T) {
	b, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10, Interval: 10 * time.Second})
	b.Request()
	b.Retry(flow.AttemptFailed)
	problems, err := testutil.CollectAndLint(metrics.NewCollector(newGuard(t), metrics.WithRetryBudget("payments", b)), retryFamilyNames()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func retryFamilyNames() []string {
	out := make([]string, len(retryFamilies))
	for i, f := range retryFamilies {
		out[i] = "slidegate_" + f
	}
	return out
}
