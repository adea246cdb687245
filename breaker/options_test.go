package breaker

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Each constructor, so that every test of options covers both.
var constructors = map[string]func(opts ...Option) error{
	"NewSRE":     func(opts ...Option) error { _, err := NewSRE(opts...); return err },
	"NewCircuit": func(opts ...Option) error { _, err := NewCircuit(ErrorRatio(0.5), opts...); return err },
}

// A nil where an option needs a clock or a function is an error naming the
// option, not a silent default.
func TestNilClockOrFunctionOptionIsAnError(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithClock(nil), "clock = <nil>: must not be nil"},
		{WithOutcomeOf(nil), "WithOutcomeOf(nil): must not be nil"},
	} {
		for name, build := range constructors {
			err := build(tc.opt)
			if !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an errInvalidConfig saying %q", name, err, tc.want)
			}
			// A later good option does not hide the bad one.
			err = build(tc.opt, WithClock(clock.NewManual(0)), WithOutcomeOf(excluding(func(error) bool { return false })))
			if !errors.Is(err, errInvalidConfig) {
				t.Errorf("%s with a good option after the bad one: %v, want errInvalidConfig", name, err)
			}
		}
	}
	if _, err := NewCircuit(ErrorRatio(0.5), OnStateChange(nil)); !errors.Is(err, errInvalidConfig) ||
		!strings.Contains(err.Error(), "OnStateChange(nil): must not be nil") {
		t.Errorf("OnStateChange(nil): %v, want an errInvalidConfig naming it", err)
	}
	for name, build := range constructors {
		if err := build(nil, WithClock(clock.NewManual(0))); err != nil {
			t.Errorf("%s with a nil Option: %v, want none (a nil Option is no option)", name, err)
		}
	}
}

// An option for the other kind of breaker is an error that names it.
func TestOptionForTheOtherBreakerIsAnErrorNamingIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"WithBlockPolicy", errOf(NewCircuit(ErrorRatio(0.5), WithBlockPolicy(IgnoreBlocks))), "WithBlockPolicy does not apply to a Circuit"},
		{"WithFormula", errOf(NewCircuit(ErrorRatio(0.5), WithFormula(2, 1))), "WithFormula does not apply to a Circuit"},
		{"withRandom", errOf(NewCircuit(ErrorRatio(0.5), withRandom(func() float64 { return 0 }))), "withRandom does not apply to a Circuit"},
		{"WithOpenTimeout", errOf(NewSRE(WithOpenTimeout(time.Second, 0))), "WithOpenTimeout does not apply to an SRE breaker"},
		{"WithProbes", errOf(NewSRE(WithProbes(1, 0))), "WithProbes does not apply to an SRE breaker"},
		{"OnStateChange", errOf(NewSRE(OnStateChange(func(Transition) {}))), "OnStateChange does not apply to an SRE breaker"},
		{"OnTransition", errOf(NewSRE(onTransition(func(*Circuit, Transition) {}))), "OnTransition does not apply to an SRE breaker"},
	} {
		if !errors.Is(tc.err, errInvalidConfig) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an errInvalidConfig saying %q", tc.name, tc.err, tc.want)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// An open Circuit asked at a time far before it opened has its whole timeout
// and more to go, not 0: the difference does not overflow.
func TestCircuitRetryAfterAtAFarPastTimeIsNotZero(t *testing.T) {
	c, _ := newCircuit(t, ErrorRatio(0.5), WithMinRequests(1))
	trip(t, c)
	if d := c.retryAfterAt(math.MinInt64); d < 5*time.Second {
		t.Fatalf("retryAfterAt(MinInt64) = %v, want at least the open timeout", d)
	}
	if d := c.StatsAt(math.MinInt64).RetryAfter; d < 5*time.Second {
		t.Fatalf("StatsAt(MinInt64).RetryAfter = %v, want at least the open timeout", d)
	}
}

// Every bad strategy or option is an errInvalidConfig naming it and its
// value.
func TestBadConfigIsAnErrorNamingTheOptionAndItsValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"zero strategy", errOf(NewCircuit(Strategy{})), "zero Strategy"},
		{"ratio 0", errOf(NewCircuit(ErrorRatio(0))), "ErrorRatio threshold = 0: must be above 0 and at most 1"},
		{"ratio above 1", errOf(NewCircuit(ErrorRatio(1.5))), "ErrorRatio threshold = 1.5"},
		{"ratio NaN", errOf(NewCircuit(ErrorRatio(math.NaN()))), "ErrorRatio threshold = NaN"},
		{"count 0", errOf(NewCircuit(ErrorCount(0))), "ErrorCount n = 0: must be at least 1"},
		{"slow max RT", errOf(NewCircuit(SlowRatio(0, 0.5))), "SlowRatio max RT = 0s: must be positive"},
		{"slow ratio", errOf(NewCircuit(SlowRatio(time.Second, -1))), "SlowRatio threshold = -1"},
		{"consecutive 0", errOf(NewCircuit(ConsecutiveFailures(0))), "ConsecutiveFailures n = 0: must be at least 1"},
		{"consecutive negative", errOf(NewCircuit(ConsecutiveFailures(-3))), "ConsecutiveFailures n = -3"},
		{"trip when nil", errOf(NewCircuit(TripWhen(nil))), `TripWhen(nil): the condition must not be nil`},
		{"open timeout", errOf(NewCircuit(ErrorRatio(0.5), WithOpenTimeout(0, 0))), "open timeout = 0s: must be positive"},
		{"backoff", errOf(NewCircuit(ErrorRatio(0.5), WithOpenTimeout(5*time.Second, time.Second))), "open timeout max = 1s: must be 0 or at least the open timeout 5s"},
		{"probes", errOf(NewCircuit(ErrorRatio(0.5), WithProbes(0, 0))), "probes = 0"},
		{"too many probes", errOf(NewCircuit(ErrorRatio(0.5), WithProbes(maxProbes+1, 0))), "probes = 1025"},
		{"probe timeout", errOf(NewCircuit(ErrorRatio(0.5), WithProbes(1, -1))), "probe timeout = -1ns"},
		{"window", errOf(NewCircuit(ErrorRatio(0.5), WithWindow(3, time.Second))), "window interval = 1s: does not divide into 3"},
		{"window buckets", errOf(NewCircuit(ErrorRatio(0.5), WithWindow(-1, time.Second))), "window buckets = -1"},
		{"narrow buckets", errOf(NewCircuit(ErrorRatio(0.5), WithWindow(2000, time.Millisecond))), "window interval = 1ms"},
		{"negative interval", errOf(NewSRE(WithWindow(0, -time.Second))), "window interval = -1s"},
		{"min requests", errOf(NewCircuit(ErrorRatio(0.5), WithMinRequests(-1))), "min requests = -1: must not be negative"},
		{"SRE min requests", errOf(NewSRE(WithMinRequests(-1))), "min requests = -1: must not be negative"},
		{"K below 1", errOf(NewSRE(withK(0.5))), "K = 0.5: must be at least 1"},
		{"K infinite", errOf(NewSRE(withK(math.Inf(1)))), "K = +Inf"},
		{"protection", errOf(NewSRE(withProtection(-1))), "protection = -1: must not be negative"},
		{"random", errOf(NewSRE(withRandom(nil))), "withRandom(nil): must not be nil"},
		{"block policy", errOf(NewSRE(WithBlockPolicy(7))), "block policy = 7: must be CountBlocksWhileFailing, CountBlocks or IgnoreBlocks"},
	} {
		if !errors.Is(tc.err, errInvalidConfig) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an errInvalidConfig saying %q", tc.name, tc.err, tc.want)
		}
	}
}
