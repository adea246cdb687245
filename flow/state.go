package flow

import "github.com/slidegate/slidegate/internal/flowstate"

// What the guard, its exporters and the dashboard read of the limiters,
// which this package does not export: see package flowstate.
func init() {
	flowstate.TopKeys = func(q any, now int64, n int, byBlocked bool) []flowstate.KeyStat {
		return q.(*KeyedQPS).topAt(now, n, byBlocked)
	}
	flowstate.Keys = func(q any, now int64) []flowstate.KeyStat { return q.(*KeyedQPS).keysAt(now) }
	flowstate.Shedder = func(s any, now int64) flowstate.Overload { return s.(*Shedder).stateAt(now) }
	flowstate.Adaptive = func(a any) flowstate.Overload { return a.(*Adaptive).state() }
	flowstate.KeyMemory = func(m any) (int64, int64) {
		km := m.(*KeyMemory)
		return km.inUse(), km.limit
	}
	flowstate.KeyedLeftAt = func(q any, now int64, key string) int64 { return q.(*KeyedQPS).leftAt(now, key) }
	flowstate.Retries = func(b any) flowstate.RetryStats {
		rb := b.(*RetryBudget)
		return rb.statsAt(rb.clock.Now())
	}
}
