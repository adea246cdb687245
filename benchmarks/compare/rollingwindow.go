package compare

import (
	"testing"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/window"
)

// slidegate's go-zero compatible RollingWindow, in the same shapes as
// go-zero's. It is kept in this file, apart from the other rows, so that it
// can be set aside (deleted or put behind a build tag) while that API moves.
func init() {
	addClock.Impls = append(addClock.Impls, Impl{Name: "slidegate RollingWindow", Setup: func(*testing.B) Op {
		rw := must(window.NewRollingWindow(ringBuckets, ringSpan))
		return func() int64 { rw.Add(1); return 0 }
	}})
	addNow.Impls = append(addNow.Impls, Impl{Name: "slidegate RollingWindow", Setup: func(*testing.B) Op {
		rw := must(window.NewRollingWindow(ringBuckets, ringSpan))
		now := clock.System.Now()
		return func() int64 { rw.AddAt(now, 1); return 0 }
	}})
	sumClock.Impls = append(sumClock.Impls, Impl{Name: "slidegate RollingWindow 1 s", Setup: func(b *testing.B) Op {
		rw := newFilledRolling(clock.System.Now())
		keepAlive(b, func() { rw.Add(1) })
		return func() int64 {
			var s int64
			rw.Reduce(func(bk window.Bucket) { s += bk.Sum })
			return s
		}
	}})
	sumNow.Impls = append(sumNow.Impls, Impl{Name: "slidegate RollingWindow 1 s", Setup: func(*testing.B) Op {
		now := clock.System.Now()
		rw := newFilledRolling(now)
		return func() int64 {
			var s int64
			rw.ReduceAt(now, func(bk window.Bucket) { s += bk.Sum })
			return s
		}
	}})
}

// newFilledRolling returns a 1 s RollingWindow, like go-zero's in sumClock,
// with 1 added in each of its buckets before now.
func newFilledRolling(now int64) *window.RollingWindow {
	rw := must(window.NewRollingWindow(viewBuckets, viewSpan))
	for i := range viewBuckets {
		rw.AddAt(now-int64(i)*int64(bucketWidth), 1)
	}
	return rw
}
