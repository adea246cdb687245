package breaker

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/breakerhook"
	"github.com/slidegate/slidegate/internal/timegrid"
)

// An Option customises a breaker. A bad option is an error from the
// constructor, matching [github.com/slidegate/slidegate.ErrInvalidConfig] and naming the option and its
// value: a nil clock or function, or a value out of range. So is an option
// of the other kind of breaker ([WithFormula] to a [Circuit], say): nothing
// is silently ignored. A nil Option is no option.
type Option func(*settings)

// optionID names an option, for the error of an option given to the wrong
// kind of breaker.
type optionID uint8

const (
	optFormula optionID = iota
	optRandom
	optBlockPolicy
	optOpenTimeout
	optProbes
	optListener
	optHook
	optShared
	numOptions
)

var optionNames = [numOptions]string{"WithFormula", "withRandom", "WithBlockPolicy",
	"WithOpenTimeout", "WithProbes", "OnStateChange", "OnTransition", "Shared"}

const (
	sreOnly     = 1<<optFormula | 1<<optRandom | 1<<optBlockPolicy
	circuitOnly = 1<<optOpenTimeout | 1<<optProbes | 1<<optListener | 1<<optHook | 1<<optShared
)

// settings are every option's value; each constructor reads its own.
type settings struct {
	given uint32 // bit i set: option optionID(i) was given
	bad   error  // the first option found bad as the options were applied

	clock       clock.Clock
	interval    time.Duration
	buckets     int
	minRequests int64
	outcomeOf   func(error) Outcome

	k           float64
	protection  int64
	random      func() float64
	blockPolicy BlockPolicy

	openTimeout    time.Duration
	maxOpenTimeout time.Duration
	probes         int
	probeTimeout   time.Duration
	onStateChange  func(Transition)
	onTransition   func(*Circuit, Transition)
	shared         bool // a Circuit reads its resource's counter (see shared.go)
	uncached       bool // a Circuit's own window reads every bucket (see uncached)
}

func (s *settings) mark(id optionID) { s.given |= 1 << id }

// fail records err as the options' error, unless an earlier option was bad.
func (s *settings) fail(err error) {
	if s.bad == nil {
		s.bad = err
	}
}

// notNil records that the option named, given a nil function, is bad.
func (s *settings) notNil(isNil bool, option string) {
	if isNil {
		s.fail(fmt.Errorf("%w: %s(nil): must not be nil", errInvalidConfig, option))
	}
}

// WithClock makes the breaker read time from c instead of [clock.System].
// Tests and simulations pass a [clock.Manual]. A nil c is an error.
func WithClock(c clock.Clock) Option {
	return func(s *settings) {
		if c == nil {
			s.fail(fmt.Errorf("%w: clock = %v: must not be nil", errInvalidConfig, c))
		}
		s.clock = c
	}
}

// WithWindow sets the sliding window the breaker counts outcomes over: the
// last interval, in buckets buckets (the order of [window.NewCounter]). The
// defaults are 10 s, in 40 buckets for an [SRE] breaker and 10 for a
// [Circuit]. A number of buckets or an interval of 0 keeps its default. The
// interval must divide into whole nanoseconds per bucket, each at least
// 1 µs. A negative value is an error.
func WithWindow(buckets int, interval time.Duration) Option {
	return func(s *settings) {
		if interval != 0 {
			s.interval = interval
		}
		if buckets != 0 {
			s.buckets = buckets
		}
	}
}

// WithMinRequests sets the minimum volume. While fewer than n requests in
// the window have ended with a counted outcome, an [SRE] breaker blocks
// nothing and a [Circuit] does not trip. n must not be negative. An SRE
// breaker has no minimum by default: its protection spares light traffic
// (see [WithFormula]). A Circuit's default is 10, but 0 for
// [ConsecutiveFailures], whose run of n failures is its own volume. It is 0
// for [TripWhen] too, whose condition sees [Stats.Requests].
func WithMinRequests(n int64) Option {
	return func(s *settings) { s.minRequests = n }
}

// WithOutcomeOf makes f say what a request's error tells of the
// dependency, in [SRE.Do], [Circuit.Do] and [Promise.Done]: a [Success], a
// [Failure], or [Ignored] (counted as neither). By default a nil error is a
// success and any other a failure. f must be safe for concurrent use,
// quick, and never block. A nil f is an error.
func WithOutcomeOf(f func(err error) Outcome) Option {
	return func(s *settings) { s.notNil(f == nil, "WithOutcomeOf"); s.outcomeOf = f }
}

// WithFormula sets the two constants of an [SRE] breaker's formula. k is
// how many requests it lets through per request that succeeds: 2 by
// default, the Google SRE book's (go-zero's starts at 1.5). A lower k
// blocks sooner. It must be at least 1, or the breaker would block
// requests to a healthy dependency; a k of 0 keeps the default. protection
// is how many requests in the window are spared from the block ratio, so
// that a few failures among light traffic block nothing: 5 by default,
// go-zero's. It must not be negative.
func WithFormula(k float64, protection int64) Option {
	return func(s *settings) {
		if k != 0 {
			s.k = k
		}
		s.protection = protection
		s.mark(optFormula)
	}
}

// withRandom sets the source an SRE breaker draws from to decide whether to
// block a request: f returns a number in [0, 1), and is safe for concurrent
// use if the breaker is (rand.Float64 by default). Tests and simulations
// pass a deterministic source; the comparison module reaches it through
// internal/breakerhook. A nil f is an error.
func withRandom(f func() float64) Option {
	return func(s *settings) { s.notNil(f == nil, "withRandom"); s.random = f; s.mark(optRandom) }
}

// WithBlockPolicy says whether an [SRE] breaker counts the requests it
// blocks as requests (see [BlockPolicy]). The default is
// [CountBlocksWhileFailing].
func WithBlockPolicy(p BlockPolicy) Option {
	return func(s *settings) { s.blockPolicy = p; s.mark(optBlockPolicy) }
}

// WithOpenTimeout sets how long a [Circuit] stays open before it lets a
// probe through: d, 5 s by default. d must be positive. At exactly the
// timeout, the next request is a probe. A max above d makes the timeout
// back off: each time probing fails and the circuit opens again, the
// timeout doubles, up to max. Closing resets it. A max of 0 keeps the
// timeout at d; another max below d is an error.
func WithOpenTimeout(d, max time.Duration) Option {
	return func(s *settings) { s.openTimeout, s.maxOpenTimeout = d, max; s.mark(optOpenTimeout) }
}

// WithProbes sets how a half-open [Circuit] probes. At most n probes are in
// flight at once, and n successful probes close it: 1 by default, at most
// 1024. A probe not finished within timeout has failed, at exactly the
// timeout too. A timeout of 0 is the open timeout, the default; a negative
// one is an error.
func WithProbes(n int, timeout time.Duration) Option {
	return func(s *settings) { s.probes, s.probeTimeout = n, timeout; s.mark(optProbes) }
}

// OnStateChange registers f to be told of a [Circuit]'s state changes, in
// the order they happen. f runs on a goroutine of its own, only while there
// are changes to tell, so a slow f never holds up a request. If f falls more
// than 64 changes behind, the oldest are dropped, and counted in
// [Transition.Dropped]. A nil f is an error.
func OnStateChange(f func(Transition)) Option {
	return func(s *settings) { s.notNil(f == nil, "OnStateChange"); s.onStateChange = f; s.mark(optListener) }
}

// onTransition registers f to be told of a Circuit's state changes, and of
// the Circuit that changed, as they happen: f runs on the goroutine that
// makes the change, with the Circuit's state lock held, before any other
// change. It must return at once, never wait, and never call the Circuit.
// It is for the guard's registry of many circuits, which queues the change
// itself (one f serves them all, so a circuit costs nothing more), and is
// reached through internal/breakerhook. A nil f is an error.
func onTransition(f func(*Circuit, Transition)) Option {
	return func(s *settings) { s.notNil(f == nil, "OnTransition"); s.onTransition = f; s.mark(optHook) }
}

// The guard's and the comparison module's ways in (see internal/breakerhook).
func init() {
	breakerhook.OnTransition = onTransition
	breakerhook.WithRandom = withRandom
	breakerhook.RecordAt = Promise.recordAt
	breakerhook.RetryAfterAt = (*Circuit).retryAfterAt
	breakerhook.Shared = shared
	breakerhook.Share = (*Circuit).share
	breakerhook.TakeShared = Promise.takeShared
	breakerhook.SettleShared = Promise.settleShared
	breakerhook.Uncounted = (*Circuit).uncounted
	breakerhook.UncountedAfter = (*Circuit).uncountedAfter
	breakerhook.Unshare = (*Circuit).unshare
	breakerhook.Shares = (*Circuit).shares
	breakerhook.Uncached = uncached
	breakerhook.Thresholds = (*Circuit).thresholdsFor
	breakerhook.SetThresholds = (*Circuit).setThresholds
}

// building holds the settings being built, reused: an Option is called
// through its function value, so settings given to it are on the heap, and
// one per constructor would be an allocation per breaker made. An Option
// keeps no pointer to the settings it sets.
var building = sync.Pool{New: func() any { return new(settings) }}

// build applies opts over the defaults and checks what every breaker shares.
// only is the set of kind-specific options this breaker takes.
func build(opts []Option, defaults settings, only uint32, kind string) (settings, error) {
	p := building.Get().(*settings)
	*p = defaults
	p.clock = clock.System
	for _, opt := range opts {
		if opt != nil {
			opt(p)
		}
	}
	s := *p
	*p = settings{} // keeps nothing alive
	building.Put(p)
	if s.bad != nil {
		return s, s.bad
	}
	if extra := s.given &^ only; extra != 0 {
		for id := optionID(0); id < numOptions; id++ {
			if extra&(1<<id) != 0 {
				return s, fmt.Errorf("%w: %s does not apply to %s", errInvalidConfig, optionNames[id], kind)
			}
		}
	}
	if err := timegrid.CheckWindow(s.interval, s.buckets); err != nil {
		return s, fmt.Errorf("%w: window %w", errInvalidConfig, err)
	}
	if s.minRequests < 0 {
		return s, fmt.Errorf("%w: min requests = %d: must not be negative", errInvalidConfig, s.minRequests)
	}
	return s, nil
}

// checkRatio checks a threshold that must lie in (0, 1].
func checkRatio(name string, x float64) error {
	if !(x > 0 && x <= 1) {
		return fmt.Errorf("%w: %s = %v: must be above 0 and at most 1", errInvalidConfig, name, x)
	}
	return nil
}

var defaultRandom = rand.Float64

// finite reports whether x is neither infinite nor NaN.
func finite(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }
