package breaker

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/internal/breakerlimits"
)

// thresholds are what a Circuit judges by that a guard's reload may change
// in place (see internal/breakerhook's Thresholds): its strategy's
// threshold, count or slow time (never its kind), the minimum volume, the
// open timeout and its backoff maximum, the probes and their timeout.
//
// A Circuit reads them through one atomic pointer to a value never
// changed once published: a request sees one set whole, never parts of
// two. What each change does to a circuit follows from where it is read:
//
//   - The strategy and the minimum volume are read when an outcome is
//     counted: a closed circuit judges its window, with the counts it
//     holds, by the new ones at its next failure (or slow request).
//   - The open timeout and its maximum are read when the circuit opens: an
//     open circuit stays open until the time set when it opened.
//   - The number of probes is read when a half-open spell begins: a spell
//     under way keeps its places; the next one has the new number.
//   - The probe timeout is read when a probe is judged: it applies at once,
//     to the probes in flight too.
type thresholds struct {
	strategy     Strategy
	minRequests  int64
	probeTimeout int64 // nanoseconds
	openTimeout  time.Duration
	maxOpen      time.Duration
	probes       int32 // probe places of a half-open spell
}

// circuitSettings applies opts over a Circuit's defaults for strategy s,
// checks them, and returns them and the thresholds they give.
func circuitSettings(s Strategy, opts []Option) (settings, thresholds, error) {
	if err := s.check(); err != nil {
		return settings{}, thresholds{}, err
	}
	st, err := build(opts, settings{
		interval: breakerlimits.DefaultInterval, buckets: breakerlimits.DefaultCircuitBuckets, minRequests: s.minRequests(),
		openTimeout: breakerlimits.DefaultOpenTimeout, probes: breakerlimits.DefaultProbes,
	}, circuitOnly, "a Circuit")
	if err != nil {
		return st, thresholds{}, err
	}
	if st.openTimeout <= 0 {
		return st, thresholds{}, fmt.Errorf("%w: open timeout = %v: must be positive", errInvalidConfig, st.openTimeout)
	}
	if st.maxOpenTimeout == 0 {
		st.maxOpenTimeout = st.openTimeout
	}
	if st.maxOpenTimeout < st.openTimeout {
		return st, thresholds{}, fmt.Errorf("%w: open timeout max = %v: must be 0 or at least the open timeout %v", errInvalidConfig, st.maxOpenTimeout, st.openTimeout)
	}
	if st.probes < 1 || st.probes > maxProbes {
		return st, thresholds{}, fmt.Errorf("%w: probes = %d: must be between 1 and %d", errInvalidConfig, st.probes, maxProbes)
	}
	if st.given&(1<<optProbes) == 0 || st.probeTimeout == 0 {
		st.probeTimeout = st.openTimeout
	}
	if st.probeTimeout < 0 {
		return st, thresholds{}, fmt.Errorf("%w: probe timeout = %v: must be positive", errInvalidConfig, st.probeTimeout)
	}
	return st, thresholds{
		strategy:     s,
		minRequests:  st.minRequests,
		probeTimeout: int64(st.probeTimeout),
		openTimeout:  st.openTimeout,
		maxOpen:      st.maxOpenTimeout,
		probes:       int32(st.probes),
	}, nil
}

// thresholdsFor returns the thresholds of a circuit like c made with
// strategy s and options opts, to give c with setThresholds, or the error
// NewCircuit would return for them. s must be of c's kind, and opts give
// c's window: only thresholds change in place. Whether opts share is
// c's to keep: a circuit that reads its resource's counter goes on.
func (c *Circuit) thresholdsFor(s Strategy, opts ...Option) (any, error) {
	st, th, err := circuitSettings(s, opts)
	if err != nil {
		return nil, err
	}
	was := c.th.Load()
	switch {
	case s.kind != was.strategy.kind || s.kind == tripWhen:
		return nil, fmt.Errorf("%w: a %v strategy cannot take the thresholds of a %v one in place", errInvalidConfig, was.strategy.kind, s.kind)
	case st.interval != c.interval || st.buckets != int(c.buckets):
		return nil, fmt.Errorf("%w: window = %d buckets over %v: a circuit of %d over %v cannot take it in place", errInvalidConfig, st.buckets, st.interval, c.buckets, c.interval)
	case st.outcomeOf != nil || st.uncached != c.uncached:
		return nil, fmt.Errorf("%w: only thresholds change in place", errInvalidConfig)
	}
	return &th, nil
}

// setThresholds gives c thresholds th, which thresholdsFor returned for c.
// Its counts, its state and the probes in flight stay: see thresholds for
// when each takes effect.
func (c *Circuit) setThresholds(th any) {
	c.th.Store(th.(*thresholds))
}
