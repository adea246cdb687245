package window

import "time"

// What the tests read of a Counter or a RollingWindow beyond its API: how long
// it reads, and the rates and means derived from its sums.

// duration returns how long c reads: its buckets times their width.
func (c *Counter) duration() time.Duration { return time.Duration(c.k * c.r.width) }

// width returns the width of c's buckets.
func (c *Counter) width() time.Duration { return time.Duration(c.r.width) }

// rateAt returns event e per second over what c reads at time now.
func (c *Counter) rateAt(now int64, e Event) float64 {
	return float64(c.SumAt(now, e)) / c.duration().Seconds()
}

// rate is rateAt at the current time.
func (c *Counter) rate(e Event) float64 { return c.rateAt(c.r.clock.Now(), e) }

// avgRTAt returns the sum of RT over the count of Succeeded at time now, or
// 0 when none succeeded.
func (c *Counter) avgRTAt(now int64) float64 {
	s := c.SumsAt(now)
	if s[Succeeded] == 0 {
		return 0
	}
	return float64(s[RT]) / float64(s[Succeeded])
}

// avgRT is avgRTAt at the current time.
func (c *Counter) avgRT() float64 { return c.avgRTAt(c.r.clock.Now()) }

// width returns the width of rw's buckets.
func (rw *RollingWindow) width() time.Duration { return time.Duration(rw.r.width) }

// interval returns how long rw covers: its buckets times their width.
func (rw *RollingWindow) interval() time.Duration { return time.Duration(rw.r.width * rw.r.n) }
