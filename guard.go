package slidegate

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// A Guard holds named resources, their rules and their statistics. Wrap the
// code that uses a resource between [Guard.Enter] and [Entry.Exit], or in
// [Guard.Do]. Enter asks the resource's rules whether the request may go.
// It returns a [*BlockError] when one of them blocks it. Exit records the
// outcome and the response time.
//
// Rules are swapped in whole (SetRules) as an immutable snapshot: Enter takes
// no lock, copies no rule, and looks the resource up once. Each rule is bound
// to its limiter or breaker when the rules are set. A new set of rules keeps
// the limiter or breaker of every rule it repeats unchanged, with its counts
// and state. A rule whose only change is its limit keeps its limiter too,
// where the limiter can change its limit in place. The requests it has
// allowed, those in flight included, count against the new limit.
//
// Every resource has statistics, rules or not (Stats, Resources). A guard
// keeps statistics for at most WithMaxResources resources, and names of at
// most 256 bytes. The resources its rules name count towards the
// bound and are kept even beyond it. When the guard is full, resources idle
// for a whole statistics window are evicted, and new ones are counted
// together as OtherResource, so that names built from user input cannot
// exhaust memory.
//
// A Guard is safe for concurrent use. Enter and Exit allocate nothing when
// the request is allowed without waiting (a throttle's or a borrowed
// place's wait sleeps on a timer).
//
// The zero Guard is not usable; make one with New (or use Default).
type Guard struct {
	clock     clock.Clock
	snap      atomic.Pointer[snapshot]
	load      sync.Mutex // serialises SetRules
	resources *resourceTable
	log       *slog.Logger
	inbound   *resource      // the guard's inbound traffic (see WithInbound)
	cluster   Cluster        // keeps the cluster rules' counts; nil without WithCluster
	cpu       func() float64 // the CPU usage shed rules read; nil without WithCPU
	events    *events
	// onTransition is g.breakerChanged, made once: every circuit's
	// OnTransition, so that a breaker rule costs no function value.
	onTransition func(*breaker.Circuit, breaker.Transition)
	// keys is what the per-key rules draw from (WithKeyMemory).
	keys *flow.KeyMemory
	// unusedAt is when Enter looks for unused rules (unused.go);
	// math.MaxInt64 when there is nothing to look for.
	unusedAt atomic.Int64
}

// An Option customises a Guard.
type Option func(*guardOptions)

type guardOptions struct {
	clock        clock.Clock
	maxResources int
	log          *slog.Logger
	cluster      Cluster
	cpu          func() float64
	keyMemory    int64
	err          error // the first bad option
}

// ErrInvalidConfig is matched by every error any package of slidegate
// returns for a bad setting: [New]'s options, the constructors of
// [github.com/slidegate/slidegate/flow], window and breaker, and the
// integrations' options. Use [errors.Is]. The message names the setting
// and its value.
var ErrInvalidConfig = config.ErrInvalid

// errInvalidConfig is what this package's own configuration errors wrap.
var errInvalidConfig = config.Sentinel("slidegate")

// bad records a bad option, unless one was found before.
func (o *guardOptions) bad(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{errInvalidConfig}, args...)...)
	}
}

// WithClock makes the guard read time from c instead of clock.System. A nil
// c is an error.
func WithClock(c clock.Clock) Option {
	return func(o *guardOptions) {
		if c == nil {
			o.bad("clock = nil: give a clock, or leave the option out for clock.System")
			return
		}
		o.clock = c
	}
}

// WithMaxResources bounds how many resources the guard keeps statistics for
// (default 4096; at least 1), and so their memory, about
// ResourceBytes each. Resources that rules name count towards the bound and
// are kept even beyond it.
func WithMaxResources(n int) Option {
	return func(o *guardOptions) {
		if n < 1 {
			o.bad("max resources = %d: must be at least 1", n)
			return
		}
		o.maxResources = n
	}
}

// WithLogger makes the guard log through l (rule changes, rules refused);
// by default it logs nothing. It never logs per request. A nil l is an
// error.
func WithLogger(l *slog.Logger) Option {
	return func(o *guardOptions) {
		if l == nil {
			o.bad("logger = nil: give a logger, or leave the option out to log nothing")
			return
		}
		o.log = l
	}
}

// WithCluster makes the guard keep the counts of its cluster-wide flow rules
// (FlowRule.Cluster) in c, where every instance of the service sees them:
// a *redisflow.Cluster keeps them in Redis. A guard without a cluster
// refuses rules marked cluster-wide. A nil c is an error.
func WithCluster(c Cluster) Option {
	return func(o *guardOptions) {
		if c == nil {
			o.bad("cluster = nil: give a cluster, or leave the option out")
			return
		}
		o.cluster = c
	}
}

// WithCPU makes the guard's shed rules read the CPU from usage: the share
// of its CPU capacity the process uses, in [0, 1]. Give it the Usage of a
// cpu.Sampler, which reads what the process's cgroup may use, off the hot
// path, and reads one atomic here; close the sampler when the guard is no
// longer used. usage is called on every request to a resource with a shed
// rule, and must be as cheap. A guard without a CPU refuses shed rules
// that read one. A nil usage is an error.
func WithCPU(usage func() float64) Option {
	return func(o *guardOptions) {
		if usage == nil {
			o.bad("cpu = nil: give the Usage of a cpu.Sampler, or leave the option out")
			return
		}
		o.cpu = usage
	}
}

// A Cluster keeps the counts of cluster-wide flow rules for all the
// instances of a service. Package redisflow keeps them in Redis. A Cluster
// may also be a [HealthReporter], a [HealthNotifier] or a [KeyedCluster].
type Cluster interface {
	// Limiter returns the limiter of a cluster-wide rule, or an error
	// naming what it cannot do. The guard has set the rule's Interval and
	// Buckets (1s and 25 when the rule leaves them out).
	Limiter(rule FlowRule) (ClusterLimiter, error)
}

// A HealthReporter is a [Cluster] that reports its health.
// [Guard.ClusterHealth] returns it, and the metrics export it.
type HealthReporter interface {
	Health() ClusterHealth
}

// A HealthNotifier is a [Cluster] that tells the guard when its health
// changes. The guard records each change as a "cluster_changed" event.
// OnHealthChange is called once, by [New]. The Cluster may call f from
// any goroutine, and f does not wait.
type HealthNotifier interface {
	OnHealthChange(f func(ClusterHealth))
}

// A LimitSetter is a [ClusterLimiter] that takes a new limit in place. A
// reload that changes only a cluster rule's limit keeps such a limiter.
type LimitSetter interface {
	SetLimit(limit int64) error
}

// ClusterHealth is what a [HealthReporter] says of its health.
type ClusterHealth struct {
	// Healthy reports whether the cluster is deciding; false while the
	// cluster rules' limiters use their fallback.
	Healthy bool
	// Failures counts the calls to the cluster that failed or timed out;
	// Fallbacks the decisions the fallback made instead.
	Failures, Fallbacks uint64
	// Err is the last error that retrying will not fix (a wrong password,
	// a missing permission or command), while it lasts; nil otherwise.
	Err error
}

// clusterChanged records a change of the cluster's health.
func (g *Guard) clusterChanged(h ClusterHealth) {
	g.events.record(Event{At: g.clock.Now(), Kind: clusterChanged, Cluster: h})
}

// A KeyedCluster is a Cluster that also keeps per-key cluster-wide limits
// (FlowRule.Cluster with PerKey). A guard whose Cluster is not one refuses
// such rules.
type KeyedCluster interface {
	Cluster
	// KeyedLimiter returns the limiter of a resource's per-key cluster QPS
	// rules, all decided together for a key: a request one of them refuses
	// counts in none. The guard has set each rule's Interval and Buckets
	// (to 1s and 20 when the rule leaves them out).
	KeyedLimiter(rules []FlowRule) (KeyedClusterLimiter, error)
}

// A KeyedClusterLimiter is the limiter of a resource's per-key cluster QPS
// rules (KeyedCluster).
type KeyedClusterLimiter interface {
	// AllowKeyN decides whether n requests with the given key may proceed
	// under every rule, and counts them under every rule if so. When they
	// may not, rule is the index, in the rules the limiter was made from,
	// of the rule that refused them, and the Decision's RetryAfter says
	// when that key fits again. It must return promptly, whatever ctx
	// allows: Enter waits for it.
	AllowKeyN(ctx context.Context, key string, n int64) (d flow.Decision, rule int)
}

// A ClusterLimiter is the limiter of one cluster-wide rule.
type ClusterLimiter interface {
	// AllowN decides whether n requests may proceed, and counts them if
	// so, as flow.QPS does, but for all instances together. It must
	// return promptly, whatever ctx allows: Enter waits for it.
	AllowN(ctx context.Context, n int64) flow.Decision
}

// New returns a Guard without rules, or an error wrapping ErrInvalidConfig
// that names the first bad option and its value. A nil option is no option.
func New(opts ...Option) (*Guard, error) {
	o := guardOptions{clock: clock.System, maxResources: bounds.DefaultMaxResources, keyMemory: flowlimits.DefaultKeyMemory}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.log == nil {
		o.log = slog.New(discard{})
	}
	g := &Guard{clock: o.clock, resources: newResourceTable(o.maxResources, o.clock), log: o.log, cluster: o.cluster, cpu: o.cpu,
		events: newEvents(o.log)}
	g.onTransition = g.breakerChanged
	g.keys, _ = flow.NewKeyMemory(o.keyMemory) // checked by WithKeyMemory
	g.resources.full = g.events.full
	if c, ok := o.cluster.(HealthNotifier); ok {
		c.OnHealthChange(g.clusterChanged)
	}
	g.inbound = newResource("(inbound)", o.clock)
	g.inbound.markInbound() // by definition
	g.snap.Store(&snapshot{by: map[string]*binding{}})
	g.unusedAt.Store(math.MaxInt64)
	return g, nil
}

// SetRules validates rules and, if they are sound, puts them in force in one
// step. Otherwise it returns a *RulesError listing every problem, and the
// rules in force stay in force.
//
// A rule the new rules keep keeps its state: its limiter's counts, its
// breaker's state. So does a rule that changes only its limit, unless it
// warms up, and a breaker rule that changes only its thresholds
// ([BreakerRule] says which).
//
// Either way it records an event (OnEvent): "rules_refused" with the error, or
// "rules_changed" with what changed, when anything did.
func (g *Guard) SetRules(rules Rules) error {
	// The rules that compile builds are judged by their build, not built
	// twice; should anything fail, Validate judges them all, so that the
	// error is the one it gives.
	if rules.validate(judgeUnbuilt) != nil {
		err := rules.Validate()
		g.events.record(Event{At: g.clock.Now(), Kind: rulesRefused, Err: err})
		return err
	}
	g.load.Lock()
	defer g.load.Unlock()
	prev := g.snap.Load()
	if prev.kept.same(&rules) {
		// The rules in force, given again: the snapshot in force is the
		// one compile would make, every enforcer taken over as it is.
		g.unusedAt.Store(g.clock.Now() + int64(unusedAfter))
		return nil
	}
	rules = rules.clone() // the caller may change its slices afterwards
	s, thresholds, err := g.compile(rules, prev, prev.kept.rules())
	if err != nil {
		if verr := rules.Validate(); verr != nil {
			err = verr
		}
		g.events.record(Event{At: g.clock.Now(), Kind: rulesRefused, Err: err})
		return err
	}
	now := g.clock.Now()
	// Told before they are in force, so that a breaker of the new rules
	// changing state is told after the rule that made it.
	if changes, all := changesOf(&prev.kept, &s.kept, prev.names(), s.names(), bounds.MaxEventChanges); all > 0 {
		g.events.record(Event{At: now, Kind: rulesChanged, Changes: changes, MoreChanges: all - len(changes)})
	}
	for _, t := range thresholds {
		setThresholds(t.c, t.th)
	}
	g.snap.Store(s)
	unshared(prev, s)
	g.resources.unpin(unpinned(prev, s, rules.refs()), now)
	g.unusedAt.Store(now + int64(unusedAfter)) // see unused.go
	return nil
}

// unshared stops the resources of prev's bindings telling a breaker that
// read their counter and is not in force in next. A breaker of next that
// reads one was given it when next was compiled (bindShared).
func unshared(prev, next *snapshot) {
	for name, b := range prev.by {
		if b.shared == nil {
			continue
		}
		if nb := next.by[name]; nb == nil || nb.shared == nil {
			b.res.shared.CompareAndSwap(b.shared, nil)
		}
	}
}

// unpinned returns the names of the resources that the rules of prev pin
// (bind one, or are read as a RefResource) and those of next, whose rules
// read refs, do not.
func unpinned(prev, next *snapshot, refs map[string]bool) iter.Seq[string] {
	gone := func(name string) bool { return next.by[name] == nil && !refs[name] }
	return func(yield func(string) bool) {
		for name := range prev.by {
			if gone(name) && !yield(name) {
				return
			}
		}
		for i := range prev.kept.flow {
			if w := prev.kept.flow[i].whole; w != nil && w.RefResource != "" && gone(w.RefResource) && !yield(w.RefResource) {
				return
			}
		}
	}
}

// discard is a slog.Handler that drops everything.
type discard struct{}

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discard) WithGroup(string) slog.Handler           { return d }

var defaultGuard = sync.OnceValue(func() *Guard {
	g, err := New()
	if err != nil {
		panic("slidegate: the default guard: " + err.Error()) // New without options cannot fail
	}
	return g
})

// Default returns the package's default guard: for a program that needs
// one, and for the middleware given no guard. Libraries and tests should
// make their own with New.
func Default() *Guard { return defaultGuard() }
