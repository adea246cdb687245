package compare

import (
	"testing"
	"time"
)

// Under total failure the budget's clients send at most 1 + ratio + the
// floor's share of attempts per request, where naive ones send
// 1 + MaxRetries.
func TestRetryLoadStaysWithinTheBudget(t *testing.T) {
	l, err := SimulateRetryLoad(1000, time.Minute, 3, 10*time.Millisecond, 0.2, 10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bound := 1 + l.Ratio + l.Floor/(l.Rate*l.Interval.Seconds())
	t.Logf("naive %.2f, budgeted %.4f, bound %.4f", l.Naive, l.Budgeted, bound)
	if l.Naive != 4 || l.Budgeted > bound || l.Budgeted < 1.15 {
		t.Fatalf("attempts per request: naive %.2f (want 4), budgeted %.4f (want at most %.4f, and the budget used)", l.Naive, l.Budgeted, bound)
	}
}
