package otelguard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// ScopeName is the name of the meter the instruments are made with. It is
// also the instrumentation scope of the [Producer]'s histograms.
const ScopeName = "github.com/slidegate/slidegate/otelguard"

// instruments are the observable instruments of one registration.
type instruments struct {
	requests, inboundRequests         metric.Int64ObservableCounter
	inFlight, inboundInFlight         metric.Int64ObservableUpDownCounter
	breakerState                      metric.Int64ObservableGauge
	ruleLimit, overloadLimit          metric.Int64ObservableGauge
	overloadCap                       metric.Int64ObservableGauge
	clusterHealthy                    metric.Int64ObservableGauge
	clusterFailures, clusterFallbacks metric.Int64ObservableCounter

	attrs []attribute.KeyValue // WithAttributes, on every data point

	// mu keeps one collection at a time in resources and inbound: each
	// reader of the MeterProvider collects on its own.
	mu        sync.Mutex
	resources reading[*requestSeries]
	inbound   *requestSeries
}

// with returns the option that observes with the attributes kv and those
// of WithAttributes.
func (in *instruments) with(kv ...attribute.KeyValue) metric.ObserveOption {
	return metric.WithAttributes(append(slices.Clip(in.attrs), kv...)...)
}

// Register makes the guard's instruments with a meter of mp named
// [ScopeName]. It registers one callback that reads the guard whenever a
// reader collects. The callback reads the totals of every resource
// [slidegate.Guard.Resources] returns, once each, and calls
// [slidegate.Guard.Stats] of [slidegate.InboundResource], [slidegate.Guard.Breakers],
// [slidegate.Guard.Rules], [slidegate.Guard.Overload] and
// [slidegate.Guard.ClusterHealth].
//
// Nothing is added to the request path. Enter and Exit run no code of this
// package, and allocate nothing more, with or without a registration.
// Nothing runs between collections. The response-time histograms are not
// here: the OpenTelemetry API has no observable histogram. See [Producer].
//
// The option it takes is [WithAttributes]. It returns an error naming the
// option refused, or the instrument the meter refused. It then registers
// nothing.
//
// The callback's [metric.Registration] is returned. Its Unregister ends
// the reads: collections after it read nothing from the guard. The
// instruments stay with the meter, without data: the OpenTelemetry API
// cannot remove an instrument.
func Register(g *slidegate.Guard, mp metric.MeterProvider, opts ...Option) (metric.Registration, error) {
	if g == nil {
		return nil, errors.New("otelguard: guard is nil")
	}
	if mp == nil {
		return nil, errors.New("otelguard: meter provider is nil")
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.bucketsSet {
		return nil, errors.New("otelguard: WithBuckets sets the Producer's histograms, and Register makes none: give it to NewProducer")
	}
	m := mp.Meter(ScopeName)
	in := &instruments{attrs: o.attrs}
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("otelguard: instrument %s: %w", name, err))
		}
	}
	in.requests, err = m.Int64ObservableCounter("slidegate.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests to a resource since the guard began keeping its statistics, by outcome: allowed, blocked and would_block (by reason), succeeded, failed."))
	check("slidegate.requests", err)
	in.inFlight, err = m.Int64ObservableUpDownCounter("slidegate.in_flight_requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests to a resource that entered and have not exited."))
	check("slidegate.in_flight_requests", err)
	in.inboundRequests, err = m.Int64ObservableCounter("slidegate.inbound.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests entered inbound, whatever their resource, by outcome: allowed, blocked and would_block (by reason), succeeded, failed."))
	check("slidegate.inbound.requests", err)
	in.inboundInFlight, err = m.Int64ObservableUpDownCounter("slidegate.inbound.in_flight_requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests entered inbound that have not exited."))
	check("slidegate.inbound.in_flight_requests", err)
	in.breakerState, err = m.Int64ObservableGauge("slidegate.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("1 for the state a breaker is in, 0 for the others."))
	check("slidegate.breaker.state", err)
	in.ruleLimit, err = m.Int64ObservableGauge("slidegate.rule.limit", metric.WithUnit("{request}"),
		metric.WithDescription("A flow rule's limit: requests per interval, or in flight for a concurrency rule."))
	check("slidegate.rule.limit", err)
	in.overloadLimit, err = m.Int64ObservableGauge("slidegate.overload.limit", metric.WithUnit("{request}"),
		metric.WithDescription("What a shed or adaptive rule has learnt: an adaptive rule's limit, or the capacity a shed rule keeps to while it sheds."))
	check("slidegate.overload.limit", err)
	in.overloadCap, err = m.Int64ObservableGauge("slidegate.overload.cap", metric.WithUnit("{request}"),
		metric.WithDescription("The most requests in flight a shed or adaptive rule admits now; none while a shed rule caps nothing."))
	check("slidegate.overload.cap", err)
	in.clusterHealthy, err = m.Int64ObservableGauge("slidegate.cluster.healthy", metric.WithUnit("1"),
		metric.WithDescription("1 while the guard's cluster decides, 0 while its rules use their fallback."))
	check("slidegate.cluster.healthy", err)
	in.clusterFailures, err = m.Int64ObservableCounter("slidegate.cluster.failures", metric.WithUnit("{call}"),
		metric.WithDescription("Calls to the guard's cluster that failed or timed out."))
	check("slidegate.cluster.failures", err)
	in.clusterFallbacks, err = m.Int64ObservableCounter("slidegate.cluster.fallbacks", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions the cluster rules' fallback made instead of the cluster."))
	check("slidegate.cluster.fallbacks", err)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		in.observe(g, o)
		return nil
	}, in.requests, in.inFlight, in.inboundRequests, in.inboundInFlight, in.breakerState,
		in.ruleLimit, in.overloadLimit, in.overloadCap, in.clusterHealthy, in.clusterFailures, in.clusterFallbacks)
	if err != nil {
		return nil, fmt.Errorf("otelguard: register callback: %w", err)
	}
	return reg, nil
}

// observe reads the guard once and observes every instrument.
func (in *instruments) observe(g *slidegate.Guard, o metric.Observer) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.resources.read(g, func(k seriesKey) *requestSeries {
		return in.newSeries(ResourceKey.String(k.resource), DirectionKey.String(direction(k.inbound)))
	})
	for i, r := range in.resources.rows {
		s := in.resources.entries[i].v
		in.observeRequests(o, in.requests, s, slidegate.Totals(r.Totals))
		o.ObserveInt64(in.inFlight, r.InFlight, s.inFlight)
	}
	inbound, _ := g.Stats(slidegate.InboundResource)
	if in.inbound == nil {
		in.inbound = in.newSeries()
	}
	in.observeRequests(o, in.inboundRequests, in.inbound, inbound.Totals)
	o.ObserveInt64(in.inboundInFlight, inbound.InFlight, in.inbound.inFlight)

	var breakerNames exported.RuleNames
	for _, b := range g.Breakers() {
		res := exported.Value(b.Resource)
		name := breakerNames.Of(res, b.Rule)
		for _, st := range breakerStates {
			var v int64
			if b.State == st.state {
				v = 1
			}
			o.ObserveInt64(in.breakerState, v, in.with(
				ResourceKey.String(res), RuleKey.String(name),
				BreakerStrategyKey.String(string(b.Strategy)), BreakerStateKey.String(st.value)))
		}
	}
	rules := g.Rules().Named()
	var limitNames exported.RuleNames
	for _, f := range rules.Flow {
		typ := f.Type // Named wrote it out
		if rulekind.Of(string(typ)).Learnt {
			continue // their limits are learnt: slidegate.overload.limit says them
		}
		res := exported.Value(f.Resource)
		o.ObserveInt64(in.ruleLimit, f.Limit, in.with(
			ResourceKey.String(res), RuleKey.String(limitNames.Of(res, f.Name)), RuleTypeKey.String(string(typ))))
	}
	var overloadNames exported.RuleNames
	for _, s := range g.Overload() {
		res := exported.Value(s.Resource)
		attrs := in.with(ResourceKey.String(res), RuleKey.String(overloadNames.Of(res, s.Rule)), RuleTypeKey.String(string(s.Type)))
		if s.Limit >= 0 { // -1: a shed rule that has not learnt the capacity yet
			o.ObserveInt64(in.overloadLimit, s.Limit, attrs)
		}
		if s.Cap >= 0 { // -1: it caps nothing now
			o.ObserveInt64(in.overloadCap, s.Cap, attrs)
		}
	}
	if h, ok := g.ClusterHealth(); ok {
		var v int64
		if h.Healthy {
			v = 1
		}
		o.ObserveInt64(in.clusterHealthy, v, in.with())
		o.ObserveInt64(in.clusterFailures, saturate(h.Failures), in.with())
		o.ObserveInt64(in.clusterFallbacks, saturate(h.Fallbacks), in.with())
	}
}

// A requestSeries is the attribute sets of one resource's data points, or
// of the inbound traffic's, made once while the guard keeps the resource:
// making a set (sorting and hashing its attributes) took more than the
// SDK's own work for the data point.
type requestSeries struct {
	kv                                   []attribute.KeyValue // the resource's, after WithAttributes
	allowed, succeeded, failed, inFlight metric.ObserveOption
	// blocked and wouldBlock, by reason, are made when first sent: most
	// resources never block.
	blocked, wouldBlock [len(reasons)]metric.ObserveOption
}

// newSeries returns the series of a resource of attributes kv.
func (in *instruments) newSeries(kv ...attribute.KeyValue) *requestSeries {
	s := &requestSeries{kv: append(slices.Clip(in.attrs), kv...)}
	s.allowed = s.with(OutcomeKey.String("allowed"))
	s.succeeded = s.with(OutcomeKey.String("succeeded"))
	s.failed = s.with(OutcomeKey.String("failed"))
	s.inFlight = s.with()
	return s
}

// with returns the option that observes with the series' attributes and kv.
func (s *requestSeries) with(kv ...attribute.KeyValue) metric.ObserveOption {
	return metric.WithAttributeSet(attribute.NewSet(slices.Concat(s.kv, kv)...)) // NewSet may sort what it is given
}

// observeRequests observes totals on a requests counter: allowed,
// succeeded and failed, zeros included, and blocked and would_block for
// each reason that blocked, or would have blocked, any request. Zero
// series of every reason would make a resource 17 data points, which the
// SDK's default cardinality limit (2,000 data points per instrument) would
// fold into its overflow series from 117 resources on; a blocked series
// appears with its first request, and its start time (the SDK's) says it
// counted from zero since then.
func (in *instruments) observeRequests(o metric.Observer, c metric.Int64ObservableCounter, s *requestSeries, t slidegate.Totals) {
	o.ObserveInt64(c, t.Allowed, s.allowed)
	o.ObserveInt64(c, t.Succeeded, s.succeeded)
	o.ObserveInt64(c, t.Failed, s.failed)
	for i, r := range reasons {
		if n := t.BlockedBy[r.reason]; n > 0 {
			if s.blocked[i] == nil {
				s.blocked[i] = s.with(OutcomeKey.String("blocked"), ReasonKey.String(r.value))
			}
			o.ObserveInt64(c, n, s.blocked[i])
		}
		if n := t.WouldBlockBy[r.reason]; n > 0 {
			if s.wouldBlock[i] == nil {
				s.wouldBlock[i] = s.with(OutcomeKey.String("would_block"), ReasonKey.String(r.value))
			}
			o.ObserveInt64(c, n, s.wouldBlock[i])
		}
	}
}

// saturate returns n as an int64, math.MaxInt64 beyond it.
func saturate(n uint64) int64 {
	if n > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(n)
}
