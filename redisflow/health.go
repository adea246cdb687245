package redisflow

import (
	"github.com/slidegate/slidegate"
)

// A healthState is what a change of health is told on: whether an error
// that retrying will not fix is in force, and of which kind (what Redis
// refuses), or else whether Redis is down. While such an error lasts, Redis
// going down and up again is not told: the probe may find Redis answering
// while the calls the error refuses still fail, and telling each of those
// flaps would bury the error under events.
type healthState struct {
	kind string // of the fault in force; "" if none
	down bool   // Redis is marked down; false while a fault is in force
}

// OnHealthChange makes the cluster call f with its health
// ([Cluster.Health]) each time it changes:
//   - when Redis is marked down.
//   - when Redis is found again.
//   - when an error that retrying will not fix appears ([ErrMisconfigured]).
//   - when that error clears.
//
// While such an error lasts, f is told of another kind of error appearing.
// It is not told of Redis going down and up again. A guard ([slidegate.New]
// with [slidegate.WithCluster]) registers its own func. It records each
// call as a "cluster_changed" event.
//
// The cluster calls f from whichever goroutine made the change, a
// decision's or its probe's. It makes one call at a time, in the order of
// the changes. Each call has the health as it is right after its change. f
// must return at once, without waiting for anything: it holds up the
// decision that found Redis down. If the cluster is unhealthy when f is
// given, f is called at once, so that its first call says what is true.
//
// A cluster tells every func it is given, for as long as it lives; a nil f
// is none. Each guard that shares the cluster gives it one. A func cannot
// be taken back, so a program that makes guards over and over makes a
// cluster for each. [Cluster.Close] stops the telling: a closed cluster
// falls back for good, and tells nothing of it.
func (c *Cluster) OnHealthChange(f func(slidegate.ClusterHealth)) {
	if f == nil {
		return
	}
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	if len(c.onHealth) == 0 {
		// Nobody was told: what was told last is the state now, which
		// f is told below if it is not the healthy one f assumes.
		_, c.told = c.health()
	}
	c.onHealth = append(c.onHealth, f)
	if h, s := c.health(); s != (healthState{}) && !c.closed.Load() {
		f(h)
	}
}

// health returns the cluster's health, as Health does, and its state, both
// from one read of the fault in force and of Redis's health.
func (c *Cluster) health() (slidegate.ClusterHealth, healthState) {
	f := c.fault.Load()
	down := c.down.Load()
	h := slidegate.ClusterHealth{Healthy: !down, Failures: c.failures.Load(), Fallbacks: c.fallbacks.Load()}
	if f != nil {
		h.Err = f.err
		return h, healthState{kind: f.kind}
	}
	return h, healthState{down: down}
}

// tellLocked tells the func registered of the cluster's health if its state
// changed since the last telling. c.healthMu must be held: it orders the
// tellings, and the changes of Redis's health with them.
func (c *Cluster) tellLocked() {
	if len(c.onHealth) == 0 || c.closed.Load() {
		return
	}
	h, s := c.health()
	if s == c.told {
		return
	}
	c.told = s
	for _, f := range c.onHealth {
		f(h)
	}
}

// tellHealth is tellLocked, taking the lock.
func (c *Cluster) tellHealth() {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	c.tellLocked()
}

// markDown marks Redis down after a call met err, and tells of it. Told
// already, it tells nothing, unless always is set (a fault appeared, which
// is news whether or not Redis was down). Only its first caller logs the
// change and wakes the probe.
func (c *Cluster) markDown(err error, always bool) {
	if !always && c.down.Load() {
		return // down already: no lock on the way of the decisions that keep failing
	}
	c.healthMu.Lock()
	changed := c.down.CompareAndSwap(false, true)
	if changed || always {
		c.tellLocked()
	}
	c.healthMu.Unlock()
	if !changed {
		return
	}
	c.log.Warn("redisflow: Redis is down; limiters fall back", "fallback", c.fallback.String(), "err", err)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// markUp marks Redis up again, after the probe reached it, and tells of it.
func (c *Cluster) markUp() {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	c.down.Store(false)
	c.tellLocked()
}
