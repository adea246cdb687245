package window

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// TestHotPathsDoNotAllocate pins the zero-allocation promise of every
// recording and reading method.
func TestHotPathsDoNotAllocate(t *testing.T) {
	c := clock.NewManual(int64(time.Hour))
	ctr, _ := NewCounter(10, time.Second, WithClock(c))
	view, _ := ctr.View(500 * time.Millisecond)
	rw, _ := NewRollingWindow(10, time.Second, WithClock(c))
	h, _ := NewHistogram(2, time.Second, WithClock(c))
	hv, _ := h.View(500 * time.Millisecond)
	var sink int64
	cases := map[string]func(){
		"Counter.Add":       func() { ctr.Add(Allowed, 1) },
		"Counter.AddAt":     func() { ctr.AddAt(c.Advance(time.Millisecond), Succeeded, 1) },
		"Counter.AddAt min": func() { ctr.AddAt(c.Now(), MinRT, 5) },
		"Counter.AddPairAt": func() { ctr.AddPairAt(c.Now(), Succeeded, 1, RT, 250) },
		"Counter.Sum":       func() { sink += ctr.Sum(Allowed) },
		"view SumAt":        func() { sink += view.SumAt(c.Now(), Allowed) },
		"view SumsAt":       func() { sink += view.SumsAt(c.Now())[Allowed] },
		"view MaxBucketAt":  func() { sink += view.MaxBucketAt(c.Now(), Allowed) },
		"RollingWindow.Add": func() { rw.Add(3) },
		"RollingWindow.Reduce": func() {
			rw.Reduce(func(b Bucket) { sink += b.Sum })
		},
		"Histogram.Record":        func() { h.Record(time.Duration(sink%1e9 + 1000)) },
		"Histogram.SummaryAt":     func() { sink += h.SummaryAt(c.Now()).Count },
		"Histogram view Quantile": func() { sink += int64(hv.Quantile(0.99)) },
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s allocates %.1f times per call, want 0", name, n)
		}
	}
}
