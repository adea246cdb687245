package slidegate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
)

// The errors of a cluster that cannot serve a rule.
var (
	errNoLimiter      = errors.New("the cluster made no limiter")
	errNoKeyedCluster = errors.New("the guard's cluster keeps no per-key limits (it is not a slidegate.KeyedCluster)")
	errNoCluster      = errors.New("the guard has no cluster to keep the counts in: make it with slidegate.WithCluster")
)

// buildFlow makes the rule that enforces flow rule f, read as Validate
// leaves it; the error names what the limiter refused. A nil clock is
// clock.System. A cluster rule's limiter comes from cl; with cl nil, the
// rule is built as a local QPS rule of the same shape, to check it. A rule
// on another resource is returned without that resource's statistics,
// which binding it gives it. A shed rule reads the CPU from cpu (nil: the
// guard reads none). Per-key rules draw from mem (nil: each its own).
func buildFlow(f FlowRule, c clock.Clock, cl Cluster, cpu func() float64, mem *flow.KeyMemory) (rule, error) {
	if c == nil {
		c = clock.System
	}
	interval := f.interval()
	// The buckets and the warm-up of QPS rules and throttles alike; flow
	// fills in what the rule leaves out (Validate has judged a negative
	// count).
	buckets := max(f.Buckets, 0)
	var warmUp time.Duration
	var cold float64
	if f.WarmUp > 0 {
		warmUp, cold = time.Duration(f.WarmUp), f.ColdFactor
	}
	switch {
	case f.Cluster && cl != nil:
		shaped := f
		shaped.Interval, shaped.Buckets = Duration(interval), f.buckets()
		l, err := cl.Limiter(shaped)
		if err == nil && l == nil {
			err = errNoLimiter
		}
		if err != nil {
			return nil, err
		}
		return &clusterRule{l: l}, nil
	case f.keyedTogether():
		// Alone, to check it: a guard builds a resource's per-key rules
		// together (keyGroup).
		g := keyGroup{resource: f.Resource, at: []int{0}}
		r, err := g.build([]FlowRule{f}, c, nil, mem)
		var ce *flow.ConfigError
		if errors.As(err, &ce) {
			// "windows[0].buckets": the rule's own field.
			ce.Field = ce.Field[strings.IndexByte(ce.Field, '.')+1:]
		}
		return r, err
	case f.Type == ConcurrencyRule && f.PerKey:
		l, err := flow.NewConcurrency(flow.ConcurrencySettings{Limit: f.Limit, PerKey: true, Overrides: f.Overrides, KeyMemory: mem})
		if err != nil {
			return nil, err
		}
		return &keyConcurrencyRule{c: l}, nil
	case f.Type == ShedRule:
		set := flow.ShedderSettings{CPU: cpu, CPUThreshold: f.CPUThreshold, Interval: interval, Buckets: f.buckets(), Clock: c}
		if f.CPUThreshold < 0 {
			set.CPU, set.CPUThreshold = nil, 0
		} else if cpu == nil {
			return nil, &fieldError{"cpu_threshold", errNoCPU}
		}
		s, err := flow.NewShedder(set)
		if err != nil {
			return nil, err
		}
		return &shedRule{s: s, byKey: f.byKey()}, nil
	case f.Type == AdaptiveRule:
		set := f.adaptiveSettings()
		set.Clock = c
		a, err := flow.NewAdaptive(set)
		var ce *flow.ConfigError
		if errors.As(err, &ce) && ce.Field == "initial_limit" {
			ce.Field = "limit" // the rule's field
		}
		if err != nil {
			return nil, err
		}
		return &adaptiveRule{a: a, byKey: f.byKey()}, nil
	case f.Type == ConcurrencyRule:
		l, err := flow.NewConcurrency(flow.ConcurrencySettings{Limit: f.Limit})
		if err != nil {
			return nil, err
		}
		return &concurrencyRule{c: l}, nil
	case f.RefResource != "":
		if interval%statsWidth != 0 || interval > statsInterval {
			return nil, &fieldError{"interval", fmt.Errorf("interval %v: a rule on another resource reads its statistics, which are kept over %v in buckets of %v: the interval must be a multiple of %v, at most %v",
				interval, statsInterval, statsWidth, statsWidth, statsInterval)}
		}
		return &refRule{limit: f.Limit}, nil
	case f.Type == ThrottleRule && f.PerKey:
		t, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: interval, MaxWait: time.Duration(f.MaxWait),
			PerKey: true, Overrides: f.Overrides, KeyMemory: mem, Clock: c})
		if err != nil {
			return nil, err
		}
		return &keyThrottleRule{t: t}, nil
	case f.Type == ThrottleRule && f.Limit > 0:
		t, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: interval, MaxWait: time.Duration(f.MaxWait),
			Buckets: buckets, WarmUp: warmUp, ColdFactor: cold, Clock: c})
		if err != nil {
			return nil, err
		}
		return &throttleRule{t: t, warm: f.WarmUp > 0}, nil
	}
	// A QPS rule; or a throttle of limit 0, which has no places at all and
	// blocks everything, as a QPS limit of 0 does.
	q, err := flow.NewQPS(flow.QPSSettings{Limit: f.Limit, Interval: interval, Buckets: buckets, WarmUp: warmUp, ColdFactor: cold, Clock: c})
	if err != nil {
		return nil, err
	}
	r := qpsRule{q: q, fixed: f.WarmUp > 0 || f.Type == ThrottleRule}
	if f.Borrow > 0 {
		return &borrowingRule{qpsRule: r, borrow: time.Duration(f.Borrow)}, nil
	}
	return &r, nil
}

// checkFlow has the limiters judge flow rule f's fields together, as
// buildFlow would, without making what only enforcing the rule needs: a
// per-key rule's overrides (checkKeys judges them) and its sketch, of a
// few MiB. cpu is as buildFlow's.
func checkFlow(f FlowRule, cpu func() float64) error {
	if f.PerKey {
		f.Overrides = nil
		switch f.flowType() {
		case ConcurrencyRule:
			return nil // its limit is all it has, and checkKeys has judged it
		case ThrottleRule:
			// The same pace as a throttle of all keys, and no options.
			_, err := flow.NewThrottle(flow.ThrottleSettings{Limit: f.Limit, Interval: f.interval(), MaxWait: time.Duration(f.MaxWait)})
			return err
		}
	}
	_, err := buildFlow(f, nil, nil, cpu, nil)
	return err
}

// errNoCPU is the error of a shed rule that reads the CPU in a guard that
// reads none.
var errNoCPU = errors.New("a shed rule reads the CPU, and the guard reads none: make it with slidegate.WithCPU (the Usage of a cpu.Sampler), or set cpu_threshold to -1 for no CPU signal (a cap of twice the requests in flight the service completes, shared fairly)")

// adaptiveSettings returns an adaptive rule's settings, its defaults left
// to flow.NewAdaptive.
func (f FlowRule) adaptiveSettings() flow.AdaptiveSettings {
	return flow.AdaptiveSettings{Algorithm: f.Algorithm, InitialLimit: f.Limit, MinLimit: f.MinLimit, MaxLimit: f.MaxLimit, Tolerance: f.Tolerance}
}

var blockPolicies = map[string]breaker.BlockPolicy{
	"":                           breaker.CountBlocksWhileFailing,
	"count_blocks_while_failing": breaker.CountBlocksWhileFailing,
	"count_blocks":               breaker.CountBlocks,
	"ignore_blocks":              breaker.IgnoreBlocks,
}

// buildBreaker makes the rule that enforces breaker rule b, read as Validate
// leaves it. A nil clock is clock.System; a circuit tells its changes of
// state to onChange, if not nil.
func buildBreaker(b BreakerRule, c clock.Clock, onChange func(*breaker.Circuit, breaker.Transition)) (*breakerRule, error) {
	if c == nil {
		c = clock.System
	}
	opts := []breaker.Option{breaker.WithClock(c)}
	if b.MinRequests != nil {
		opts = append(opts, breaker.WithMinRequests(*b.MinRequests))
	}
	if b.Interval != 0 || b.Buckets != 0 {
		opts = append(opts, breaker.WithWindow(b.Buckets, time.Duration(b.Interval))) // 0: the breaker's default
	}
	if b.Strategy == AdaptiveBreaker {
		if b.K != 0 {
			opts = append(opts, breaker.WithK(b.K))
		}
		if b.Protection != nil {
			opts = append(opts, breaker.WithProtection(*b.Protection))
		}
		opts = append(opts, breaker.WithBlockPolicy(blockPolicies[b.BlockPolicy]))
		a, err := breaker.NewAdaptive(opts...)
		if err != nil {
			return nil, err
		}
		return &breakerRule{b: a}, nil
	}
	if b.OpenTimeout != 0 {
		opts = append(opts, breaker.WithOpenTimeout(time.Duration(b.OpenTimeout)))
	}
	if b.MaxOpenTimeout != 0 {
		opts = append(opts, breaker.WithBackoff(time.Duration(b.MaxOpenTimeout)))
	}
	if b.Probes != 0 || b.ProbeTimeout != 0 {
		n := b.Probes
		if n == 0 {
			n = 1
		}
		opts = append(opts, breaker.WithProbes(n, time.Duration(b.ProbeTimeout)))
	}
	if onChange != nil {
		opts = append(opts, onTransition(onChange))
	}
	var s breaker.Strategy
	switch b.Strategy {
	case ErrorRatioBreaker:
		s = breaker.ErrorRatio(b.Threshold)
	case ErrorCountBreaker:
		s = breaker.ErrorCount(b.Count)
	case SlowRatioBreaker:
		s = breaker.SlowRatio(time.Duration(b.MaxRT), b.Threshold)
	case ConsecutiveFailuresBreaker:
		s = breaker.ConsecutiveFailures(b.Count)
	}
	circuit, err := breaker.NewCircuit(s, opts...)
	if err != nil {
		return nil, err
	}
	return &breakerRule{b: circuit}, nil
}
