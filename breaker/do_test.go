package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// doer is a Breaker that runs requests, as SRE and Circuit are.
type doer interface {
	Breaker
	Do(ctx context.Context, req func() error) error
}

var (
	_ doer = (*SRE)(nil)
	_ doer = (*Circuit)(nil)
)

var bg = context.Background()

// breakers returns one of each breaker on a manual clock, and a function that
// makes it block every request.
func breakers(t *testing.T) map[string]struct {
	b     doer
	block func()
} {
	t.Helper()
	a, _, r := newSRE(t, withProtection(0))
	c, _ := newCircuit(t, ErrorCount(5), WithMinRequests(1))
	return map[string]struct {
		b     doer
		block func()
	}{
		"SRE": {a, func() {
			outcomes(t, a, 0, 100)
			r.x = 0 // every draw is below the block ratio
		}},
		"Circuit": {c, func() {
			for c.Stats().State == Closed {
				settle(t, c, Failure)
			}
		}},
	}
}

func TestDoCountsAPanicAsAFailureAndPanicsOn(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			type boom struct{ n int }
			func() {
				defer func() {
					if r := recover(); r != (boom{7}) {
						t.Fatalf("recovered %v, want the request's own panic value", r)
					}
				}()
				_ = tc.b.Do(bg, func() error { panic(boom{7}) })
				t.Fatal("Do returned after a panic")
			}()
			if s := tc.b.Stats(); s.Failures != 1 || s.Requests != 1 {
				t.Fatalf("stats = %+v, want one failure", s)
			}
		})
	}
}

func TestDoDoesNotRunABlockedRequest(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			if err := tc.b.Do(bg, func() error { return nil }); err != nil {
				t.Fatalf("allowed request: %v", err)
			}
			tc.block()
			ran := false
			if err := tc.b.Do(bg, func() error { ran = true; return nil }); ran || !errors.Is(err, ErrBlocked) {
				t.Fatalf("Do when blocked: ran = %v, err = %v", ran, err)
			}
		})
	}
}

func TestDoReturnsAtOnceWhenTheContextIsDone(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			ran := false
			if err := tc.b.Do(ctx, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if s := tc.b.Stats(); ran || s.Requests != 0 || s.Blocked != 0 {
				t.Fatalf("ran = %v, stats = %+v; want nothing run or counted", ran, s)
			}
		})
	}
}

func TestDoDoesNotCountTheCallersCancellation(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			err := tc.b.Do(ctx, func() error { cancel(); return ctx.Err() })
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			// A deadline is the dependency being too slow: a failure.
			dctx, dcancel := context.WithTimeout(context.Background(), 0)
			defer dcancel()
			<-dctx.Done()
			_ = tc.b.Do(bg, func() error { return dctx.Err() })
			// context.Canceled without the caller's ctx cancelled is a failure
			// like any other error.
			_ = tc.b.Do(bg, func() error { return context.Canceled })
			if s := tc.b.Stats(); s.Requests != 2 || s.Failures != 2 {
				t.Fatalf("stats = %+v, want 2 failures (the deadline and the foreign cancel)", s)
			}
		})
	}
}

// The zero Promise, which Allow returns with an error, counts nothing in the
// breaker that returned it, however it is settled.
func TestZeroPromiseCountsNothing(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			tc.block()
			p, err := tc.b.Allow()
			if !errors.Is(err, ErrBlocked) || p != (Promise{}) {
				t.Fatalf("Allow = %+v, %v; want the zero Promise and ErrBlocked", p, err)
			}
			before := tc.b.Stats()
			p.settle(Success)
			p.settle(Failure)
			p.settle(Ignored)
			p.Done(errors.New("x"))
			p.DoneAt(0, nil)
			p.recordAt(0, Failure)
			if after := tc.b.Stats(); after != before {
				t.Fatalf("stats changed from %+v to %+v", before, after)
			}
		})
	}
}

func TestPromiseDoneClassifiesLikeDo(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			for _, err := range []error{nil, errors.New("x")} {
				p, aerr := tc.b.Allow()
				if aerr != nil {
					t.Fatal(aerr)
				}
				p.Done(err)
			}
			if s := tc.b.Stats(); s.Successes != 1 || s.Failures != 1 {
				t.Fatalf("stats = %+v, want one success, one failure", s)
			}
		})
	}
}

// DoneAt classifies an error as Done does, and counts it at the time given.
func TestPromiseDoneAtCountsAtTheGivenTime(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			const later = int64(time.Hour)
			for _, err := range []error{nil, errors.New("x")} {
				p, aerr := tc.b.AllowAt(0)
				if aerr != nil {
					t.Fatal(aerr)
				}
				p.DoneAt(later, err)
			}
			if s := tc.b.StatsAt(0); s.Requests != 0 {
				t.Fatalf("stats at 0 = %+v, want the outcomes an hour later", s)
			}
			if s := tc.b.StatsAt(later); s.Successes != 1 || s.Failures != 1 {
				t.Fatalf("stats an hour later = %+v, want one success, one failure", s)
			}
		})
	}
}

// WithOutcomeOf decides what Do and Done count: a success, a failure, or
// nothing.
func TestWithOutcomeOfDecidesWhatDoAndDoneCount(t *testing.T) {
	errNotFound, errExcluded := errors.New("not found"), errors.New("excluded")
	classify := func(err error) Outcome {
		switch {
		case err == nil, errors.Is(err, errNotFound):
			return Success
		case errors.Is(err, errExcluded):
			return Ignored
		}
		return Failure
	}
	a, err := NewSRE(WithClock(clock.NewManual(0)), WithOutcomeOf(classify))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCircuit(ErrorCount(100), WithClock(clock.NewManual(0)), WithOutcomeOf(classify))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []doer{a, c} {
		for _, e := range []error{nil, errNotFound, errExcluded, errors.New("boom")} {
			_ = b.Do(bg, func() error { return e })
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(e)
		}
		if s := b.Stats(); s.Successes != 4 || s.Failures != 2 || s.Requests != 6 {
			t.Fatalf("%T: stats = %+v, want 4 successes and 2 failures, the excluded error counted as neither", b, s)
		}
	}
}
