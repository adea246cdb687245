package compare

import (
	"fmt"
	"io"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// A RetryLoad is what clients send a downstream that fails every request:
// the attempts per original request, with and without a retry budget.
type RetryLoad struct {
	Rate       float64       // original requests per second
	Duration   time.Duration // how long they are sent
	MaxRetries int           // retries per request, each after a backoff
	Backoff    time.Duration // between two attempts of one request
	// Naive is the attempts per request of clients that retry every
	// failure; Budgeted of clients that ask a flow.RetryBudget before each
	// retry, when it is decided (so retries waiting out their backoff are
	// counted already).
	Naive, Budgeted float64
	// Ratio and Floor are the budget's: the retries it allows per request,
	// and per interval whatever the requests.
	Ratio, Floor float64
	Interval     time.Duration
}

// SimulateRetryLoad sends rate requests a second for duration, on virtual
// time, to a downstream that fails every one, each retried up to
// maxRetries times backoff apart, once without a budget and once through
// a flow.RetryBudget of ratio, minPerSecond and interval.
func SimulateRetryLoad(rate float64, duration time.Duration, maxRetries int, backoff time.Duration, ratio float64, minPerSecond int64, interval time.Duration) (RetryLoad, error) {
	clk := clock.NewManual(0)
	b, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: ratio, MinPerSecond: minPerSecond, Interval: interval, Clock: clk})
	if err != nil {
		return RetryLoad{}, err
	}
	n := int64(rate * duration.Seconds())
	var attempts int64
	for i := range n {
		at := int64(float64(i) / rate * float64(time.Second))
		b.RequestAt(at)
		attempts++
		for r := range maxRetries {
			// Decided when the attempt before it failed, at once: the
			// backoff is spent waiting, already counted.
			if _, ok := b.RetryAt(at+int64(r)*int64(backoff), flow.AttemptFailed); !ok {
				break
			}
			attempts++
		}
	}
	return RetryLoad{
		Rate: rate, Duration: duration, MaxRetries: maxRetries, Backoff: backoff,
		Naive:    float64(1 + maxRetries),
		Budgeted: float64(attempts) / float64(n),
		Ratio:    ratio, Floor: float64(minPerSecond) * interval.Seconds(), Interval: interval,
	}, nil
}

// WriteRetryLoad writes l as a small markdown table.
func WriteRetryLoad(w io.Writer, l RetryLoad) error {
	_, err := fmt.Fprintf(w, `Retries against a downstream that fails every request: %.0f requests/s for %v, up to %d retries each, %v apart.

| client | attempts per request | bound |
|---|--:|--:|
| retries every failure | %.2f | |
| flow.RetryBudget (%.0f %%, %.0f per %v) | %.4f | %.4f |
`, l.Rate, l.Duration, l.MaxRetries, l.Backoff, l.Naive, 100*l.Ratio, l.Floor, l.Interval, l.Budgeted,
		1+l.Ratio+l.Floor/(l.Rate*l.Interval.Seconds()))
	return err
}
