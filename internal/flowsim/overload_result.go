package flowsim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Special values of OverloadResult.Converge and OverloadResult.Recover.
const (
	Never         time.Duration = -1 // the condition did not hold until the end of its phase
	NotApplicable time.Duration = -2 // the scenario has no such phase
)

// ConvergeWindow is the length of the sliding window over which convergence
// and recovery are judged.
const ConvergeWindow = 500 * time.Millisecond

// An OverloadResult is what one overload simulation measured.
//
// Goodput counts the requests served within their client's timeout. The
// latency of a request is the latency its client saw: until the end of its
// service, or the timeout if that came first; blocked requests have none.
type OverloadResult struct {
	Limiter  string // the caller's name for the admitter; Simulate leaves it empty
	Scenario string

	// Over the measured part [Scenario.MeasureFrom, Scenario.Duration):
	Offered, Blocked, Good, TimedOut int64
	// OfferedShare and Goodput are the requests offered and served in time
	// as a share of what the service could complete in the measured part
	// (the integral of its capacity, so a capacity change is accounted for).
	OfferedShare, Goodput float64
	// BlockedShare is Blocked / Offered.
	BlockedShare float64
	// P99 is the 99th percentile (nearest rank) of the latencies of the
	// requests that ended in the measured part, in service times
	// (Service.ServiceTime); NaN if none ended.
	P99 float64

	// Converge is how long the admitter took, from a cold start, to keep
	// the service well used: the start of the first window of length
	// ConvergeWindow (windows start every SlotLength) from which on every
	// window that ends before the first capacity change (or the end) is
	// good. A window is good if the requests served in time in it are at
	// least 90 % of what the service could complete in it, or of what was
	// offered in it if that is less, and the p99 of the latencies that ended
	// in it is at most 2 service times. Never if the last window is not good.
	Converge time.Duration
	// Recover is how long after the last capacity increase (a change to a
	// larger factor) the admitter took to use the new capacity: the time
	// from the increase to the start of the first window from which on
	// every window until the next change (or the end) has requests served
	// in time of at least 90 % of what the service could complete in it, or
	// of what was offered if less. Latency is not judged. NotApplicable
	// without a capacity increase; Never if the last window falls short.
	Recover time.Duration
	// LimitTrend is, for an admitter with a Limit method in a scenario with
	// a Sustained part [a, b), the mean limit over the last second of it
	// divided by the mean limit over the second around its middle: above
	// 1.1, the limit grows under sustained overload. NaN otherwise.
	LimitTrend float64
}

func (s *sim) result() OverloadResult {
	res := OverloadResult{Scenario: s.sc.Name, Converge: Never, Recover: NotApplicable, LimitTrend: math.NaN()}
	from := int(s.sc.MeasureFrom / SlotLength)
	var capacity float64
	var lat []int64
	for _, sl := range s.slots[from:] {
		res.Offered += sl.offered
		res.Blocked += sl.blocked
		res.Good += sl.good
		res.TimedOut += sl.timedOut
		capacity += sl.capacity
		lat = append(lat, sl.latencies...)
	}
	res.OfferedShare = float64(res.Offered) / capacity
	res.Goodput = float64(res.Good) / capacity
	if res.Offered > 0 {
		res.BlockedShare = float64(res.Blocked) / float64(res.Offered)
	}
	res.P99 = p99(lat) / float64(s.svc.ServiceTime)

	phaseEnd := len(s.slots)
	if len(s.sc.Changes) > 0 {
		phaseEnd = int(s.sc.Changes[0].At / SlotLength)
	}
	res.Converge = s.settled(0, phaseEnd, true)

	prev := 1.0
	for i, c := range s.sc.Changes {
		if c.Factor > prev {
			start := int((c.At + SlotLength - 1) / SlotLength)
			end := len(s.slots)
			if i+1 < len(s.sc.Changes) {
				end = int(s.sc.Changes[i+1].At / SlotLength)
			}
			res.Recover = s.settled(start, end, false)
			if res.Recover >= 0 {
				res.Recover += time.Duration(start)*SlotLength - c.At
			}
		}
		prev = c.Factor
	}

	if a, b := s.sc.Sustained[0], min(s.sc.Sustained[1], s.sc.Duration); s.limit != nil && b > a {
		mid := a + (b-a)/2
		res.LimitTrend = s.meanLimit(b-time.Second, b) / s.meanLimit(mid-time.Second/2, mid+time.Second/2)
	}
	return res
}

// settled returns the time from slot start to the start of the first
// window of ConvergeWindow after which every window ending by slot end is
// good (see OverloadResult.Converge), or Never.
func (s *sim) settled(start, end int, judgeLatency bool) time.Duration {
	w := int(ConvergeWindow / SlotLength)
	first := Never
	for k := start; k+w <= end; k++ {
		var good, offered int64
		var capacity float64
		var lat []int64
		for _, sl := range s.slots[k : k+w] {
			good += sl.good
			offered += sl.offered
			capacity += sl.capacity
			if judgeLatency {
				lat = append(lat, sl.latencies...)
			}
		}
		ok := float64(good) >= 0.9*min(capacity, float64(offered))
		if judgeLatency && len(lat) > 0 {
			ok = ok && p99(lat) <= 2*float64(s.svc.ServiceTime)
		}
		switch {
		case !ok:
			first = Never
		case first == Never:
			first = time.Duration(k-start) * SlotLength
		}
	}
	return first
}

// meanLimit returns the mean of the limits sampled at the starts of the
// slots in [a, b).
func (s *sim) meanLimit(a, b time.Duration) float64 {
	var sum float64
	var n int
	for i := max(int(a/SlotLength), 0); i < len(s.slots) && time.Duration(i)*SlotLength < b; i++ {
		sum += s.slots[i].limit
		n++
	}
	return sum / float64(n)
}

// p99 returns the nearest-rank 99th percentile of lat, or NaN if it is empty.
func p99(lat []int64) float64 {
	if len(lat) == 0 {
		return math.NaN()
	}
	lat = slices.Clone(lat)
	slices.Sort(lat)
	return float64(lat[int(math.Ceil(0.99*float64(len(lat))))-1])
}

// WriteOverloadTable writes results as a markdown table: offered load and
// goodput as multiples of the capacity, p99 latency in service times, the
// blocked share, convergence and recovery times, and the limit's trend.
func WriteOverloadTable(w io.Writer, results []OverloadResult) error {
	if _, err := fmt.Fprintf(w, "| limiter | scenario | offered × C | goodput × C | p99 × S | blocked | converge | recover | limit trend |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range results {
		_, err := fmt.Fprintf(w, "| %s | %s | %.2f | %.3f | %s | %.1f %% | %s | %s | %s |\n",
			r.Limiter, r.Scenario, r.OfferedShare, r.Goodput, fmtFloat(r.P99, "%.2f"), 100*r.BlockedShare,
			FormatSettle(r.Converge), FormatSettle(r.Recover), fmtFloat(r.LimitTrend, "%.2f"))
		if err != nil {
			return err
		}
	}
	return nil
}

// FormatSettle formats a convergence or recovery time: seconds with one
// decimal, "never" or "–".
func FormatSettle(d time.Duration) string {
	switch d {
	case Never:
		return "never"
	case NotApplicable:
		return "–"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func fmtFloat(x float64, format string) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf(format, x)
}
