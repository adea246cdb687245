package flow

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/flowsim"
)

// The warm-up promise, checked over a grid of configurations: under steady
// overload a warming limiter starts at about limit/coldFactor and, within
// 1.5 × the warm-up period, allows at least 0.9 × what the same limiter
// allows without warm-up under the same traffic, and keeps doing so.

// A warmCase is one configuration of the grid.
type warmCase struct {
	limit    int64
	cold     float64
	period   time.Duration
	buckets  int
	throttle bool
	bursts   bool // requests in a burst at each bucket's start, or else evenly spread
}

func (c warmCase) String() string {
	kind, traffic := "qps", "spread"
	if c.throttle {
		kind = "throttle"
	}
	if c.bursts {
		traffic = "bursts"
	}
	return fmt.Sprintf("%s limit %d cold %v period %v buckets %d %s", kind, c.limit, c.cold, c.period, c.buckets, traffic)
}

const gridInterval = time.Second

// overloadOffered is how many times the limit the driver offers.
const overloadOffered = 10

// A warmOutcome is what one run of a case measured.
type warmOutcome struct {
	// reach is the time from which on the warming limiter allows at least
	// 0.9 × what the limiter without warm-up allows, to the end of the run;
	// never says that it still fell short in the run's last interval.
	reach time.Duration
	never bool
	run   time.Duration
	// first is what the first interval allowed.
	first int64
	// worstInterval is the most the warming QPS limiter allowed in any
	// interval; minGap is the least time between two of the warming
	// throttle's places.
	worstInterval int64
	minGap        int64
}

// startRatio is what the first interval allowed over limit/coldFactor.
func (o warmOutcome) startRatio(c warmCase) float64 {
	return float64(o.first) / (float64(c.limit) / c.cold)
}

// driveOverload offers a limiter of the case, with warm-up if warm, steady
// overload for the given number of buckets, and returns the number allowed
// in each bucket (by the time of the place given, for a throttle) and the
// times they were allowed at.
//
// To keep the grid fast the driver skips requests it knows would be blocked:
// a QPS limiter's bucket only fills until the next bucket opens, so after a
// block the rest of the bucket's requests are blocked too; a throttle's block says
// when the next place is free. TestWarmUpGridDriverSkipsOnlyBlockedRequests checks
// that skipping changes nothing.
func driveOverload(t testing.TB, c warmCase, warm bool, nb int, skip bool) ([]int64, []flowsim.Arrival) {
	t.Helper()
	var buckets int
	var period time.Duration
	var cold float64
	if warm || !c.throttle { // a Throttle has buckets only to warm up
		buckets = c.buckets
	}
	if warm {
		period, cold = c.period, c.cold
	}
	width := int64(gridInterval) / int64(c.buckets)
	end := int64(nb) * width
	counts := make([]int64, nb)
	var allowed []flowsim.Arrival
	count := func(at int64) {
		if b := at / width; b < int64(nb) {
			counts[b]++
		}
		allowed = append(allowed, flowsim.Arrival{At: at, N: 1})
	}
	step := max(int64(gridInterval)/(overloadOffered*c.limit), 1)
	burst := max((overloadOffered*c.limit+int64(c.buckets)-1)/int64(c.buckets), 1)
	if !c.throttle {
		q := mustQPS(t, QPSSettings{Limit: c.limit, Interval: gridInterval, Buckets: buckets, WarmUp: period, ColdFactor: cold})
		for b := int64(0); b < int64(nb); b++ {
			from, offered := b*width, int64(0)
			if !c.bursts {
				from = (from + step - 1) / step * step
			}
			for at := from; at < (b+1)*width; {
				if c.bursts && offered == burst {
					break
				}
				offered++
				if q.AllowAt(at).Allowed {
					count(at)
				} else if skip {
					break
				}
				if !c.bursts {
					at += step
				}
			}
		}
		return counts, allowed
	}
	// A throttle blocks what would wait at all when traffic is spread, and
	// queues up to an interval's places when it comes in bursts.
	maxWait := time.Duration(0)
	if c.bursts {
		maxWait = gridInterval
	}
	th, err := NewThrottle(ThrottleSettings{Limit: c.limit, Interval: gridInterval, MaxWait: maxWait, Buckets: buckets, WarmUp: period, ColdFactor: cold})
	if err != nil {
		t.Fatal(err)
	}
	if c.bursts {
		for b := int64(0); b < int64(nb); b++ {
			for i := int64(0); i < burst; i++ {
				d := th.ReserveNAt(b*width, "", 1)
				if d.Allowed {
					count(b*width + int64(d.Wait))
				} else if skip {
					break
				}
			}
		}
		return counts, allowed
	}
	for at := int64(0); at < end; {
		d := th.AllowNAt(at, "", 1)
		if d.Allowed {
			count(at)
		}
		next := at + step
		if !d.Allowed && skip {
			next = max(next, (at+int64(d.RetryAfter)+step-1)/step*step)
		}
		at = next
	}
	return counts, allowed
}

// measureWarmUp runs case c with and without warm-up for three warm-up
// periods (at least five intervals past one period) and measures it.
func measureWarmUp(t testing.TB, c warmCase) warmOutcome {
	t.Helper()
	width := gridInterval / time.Duration(c.buckets)
	run := max(3*c.period, c.period+5*gridInterval)
	nb := int((run + width - 1) / width)
	warm, allowed := driveOverload(t, c, true, nb, true)
	ref, refAllowed := driveOverload(t, c, false, nb, true)
	out := warmOutcome{worstInterval: flowsim.MaxInAnyInterval(allowed, gridInterval), minGap: math.MaxInt64}
	for i := 1; i < len(allowed); i++ {
		out.minGap = min(out.minGap, allowed[i].At-allowed[i-1].At)
	}
	for _, n := range warm[:c.buckets] {
		out.first += n
	}
	if c.throttle {
		out.reach = paceReach(allowed, refAllowed)
	} else {
		// A QPS limiter's rate shows over windows of buckets+1 buckets:
		// without warm-up it allows its limit in each under steady
		// overload, however unevenly within it.
		m := c.buckets + 1
		var w, r int64
		reachBucket := 0
		for b := range nb {
			w += warm[b]
			r += ref[b]
			if b >= m {
				w -= warm[b-m]
				r -= ref[b-m]
			}
			if float64(w) < 0.9*float64(r) {
				reachBucket = b + 1
			}
		}
		out.reach = time.Duration(reachBucket) * width
	}
	out.run = time.Duration(nb) * width
	out.never = out.reach > out.run-gridInterval
	return out
}

// paceReach returns the time of the throttle's place from which on every
// place follows the one before at most 1/0.9 times as far apart as the
// places of the throttle without warm-up ever are after its first interval:
// a throttle's rate shows in the spacing of its places.
func paceReach(warm, ref []flowsim.Arrival) time.Duration {
	var refGap int64
	for i := 1; i < len(ref); i++ {
		if ref[i].At >= int64(gridInterval) {
			refGap = max(refGap, ref[i].At-ref[i-1].At)
		}
	}
	var reach int64
	for i := 1; i < len(warm); i++ {
		if float64(warm[i].At-warm[i-1].At) > float64(refGap)/0.9 {
			reach = warm[i].At
		}
	}
	return time.Duration(reach)
}

// warmGrid returns the configurations to check: cold limits from 1 request
// per interval (limit/coldFactor = 1, and 1.9, rounded down to 1) to hundreds,
// periods from the shortest accepted, and bucket counts from 1 to 100, for
// both limiters and both kinds of traffic. Configurations the constructors
// block are left out.
func warmGrid() []warmCase {
	colds := []struct {
		limit int64
		cold  float64
	}{{10, 2}, {10, 10}, {19, 10}, {100, 3}, {100, 20}, {100, 100}, {300, 10}, {300, 300}}
	// And the configurations first reported not to warm: 100/s in 5
	// buckets with a cold factor of 10 stayed at 10/s, in 10 buckets with
	// 20 at 5/s, 1000/s with 300 at 3/s, and one bucket oscillated.
	var grid []warmCase
	for _, r := range []warmCase{{100, 10, 10 * gridInterval, 5, false, false}, {100, 20, 10 * gridInterval, 10, false, false},
		{1000, 300, 10 * gridInterval, flowlimits.DefaultBuckets, false, false}, {100, 3, 10 * gridInterval, 1, false, false}} {
		for _, th := range []bool{false, true} {
			for _, bursts := range []bool{false, true} {
				r.throttle, r.bursts = th, bursts
				grid = append(grid, r)
			}
		}
	}
	for _, lc := range colds {
		for _, k := range []int{1, 2, 5, 25, 100} {
			// The shortest period accepted, where a bucket's lag weighs
			// most, one and a half times that, and a long one.
			least := max(minWarmUpIntervals*gridInterval, minWarmUpBuckets*gridInterval/time.Duration(k))
			for _, p := range []time.Duration{least, least * 3 / 2, 5 * least} {
				if p == 5*least && k != flowlimits.DefaultBuckets {
					continue
				}
				for _, th := range []bool{false, true} {
					for _, bursts := range []bool{false, true} {
						grid = append(grid, warmCase{lc.limit, lc.cold, p, k, th, bursts})
					}
				}
			}
		}
	}
	return grid
}

func TestWarmUpReachesNineTenthsWithinOneAndAHalfPeriods(t *testing.T) {
	type worstCase struct {
		c     warmCase
		out   warmOutcome
		ratio float64
	}
	worst := map[bool]*worstCase{false: {ratio: -1}, true: {ratio: -1}} // by c.throttle
	failures := 0
	grid := warmGrid()
	for _, c := range grid {
		out := measureWarmUp(t, c)
		ratio := float64(out.reach) / float64(c.period)
		if w := worst[c.throttle]; out.never && !w.out.never || out.never == w.out.never && ratio > w.ratio {
			*w = worstCase{c, out, ratio}
		}
		bad := ""
		switch {
		case out.never:
			bad += fmt.Sprintf(" still below 0.9 × in the run's last interval, %v;", out.run)
		case ratio > 1.5:
			bad += fmt.Sprintf(" reached 0.9 × after %v = %.2f × the period;", out.reach, ratio)
		}
		// Under overload the first bucket allows the whole cold limit, and
		// the limit rises during the first interval by at most 1.5 × (for
		// the shortest period; a throttle's first place comes at once).
		coldLimit := float64(c.limit) / c.cold
		if float64(out.first) < math.Floor(coldLimit) || float64(out.first) > 1.5*coldLimit+1 {
			bad += fmt.Sprintf(" the first interval allowed %d, for a cold limit of %.4g;", out.first, coldLimit)
		}
		if !c.throttle && out.worstInterval > c.limit {
			bad += fmt.Sprintf(" %d allowed in one interval;", out.worstInterval)
		}
		if c.throttle && out.minGap < int64(gridInterval)/c.limit {
			bad += fmt.Sprintf(" two places %v apart, closer than at the limit;", time.Duration(out.minGap))
		}
		if bad != "" {
			failures++
			if failures <= 20 {
				t.Errorf("%v:%s", c, bad)
			}
		}
	}
	if failures > 20 {
		t.Errorf("... and %d more", failures-20)
	}
	if failures > 0 {
		t.Errorf("%d of %d configurations failed", failures, len(grid))
	}
	for _, w := range []*worstCase{worst[false], worst[true]} {
		if w.ratio < 0 {
			t.Fatal("no case ran")
		}
		reach := fmt.Sprintf("reached 0.9 × after %v (%.2f × the period)", w.out.reach, w.ratio)
		if w.out.never {
			reach = fmt.Sprintf("still below 0.9 × at the end of the run, %v", w.out.run)
		}
		t.Logf("worst of %d: %v: %s; the first interval allowed %d (%.2f × limit/coldFactor)",
			len(grid), w.c, reach, w.out.first, w.out.startRatio(w.c))
	}
}

// TestWarmUpGridDriverSkipsOnlyBlockedRequests checks the driver's shortcut: offering
// every request allows exactly what skipping the requests known to be blocked allows.
func TestWarmUpGridDriverSkipsOnlyBlockedRequests(t *testing.T) {
	for _, c := range []warmCase{
		{100, 3, 3 * gridInterval, 5, false, false},
		{100, 10, 10 * gridInterval, 1, false, true},
		{100, 3, 3 * gridInterval, 25, true, false},
		{50, 20, 5 * gridInterval, 10, true, true},
	} {
		nb := int(c.period / (gridInterval / time.Duration(c.buckets)) * 3 / 2)
		skipped, _ := driveOverload(t, c, true, nb, true)
		all, _ := driveOverload(t, c, true, nb, false)
		for b := range all {
			if skipped[b] != all[b] {
				t.Fatalf("%v: bucket %d allowed %d offering every request, %d skipping the blocked", c, b, all[b], skipped[b])
			}
		}
	}
}
