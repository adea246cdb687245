package breaker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// goZeroBreaker is a Breaker with go-zero's methods, as SRE and
// Circuit are.
type goZeroBreaker interface {
	Breaker
	AllowCtx(ctx context.Context) (Promise, error)
	Do(req func() error) error
	DoCtx(ctx context.Context, req func() error) error
	DoWithAcceptable(req func() error, acceptable Acceptable) error
	DoWithAcceptableCtx(ctx context.Context, req func() error, acceptable Acceptable) error
	DoWithFallback(req func() error, fallback Fallback) error
	DoWithFallbackCtx(ctx context.Context, req func() error, fallback Fallback) error
	DoWithFallbackAcceptable(req func() error, fallback Fallback, acceptable Acceptable) error
	DoWithFallbackAcceptableCtx(ctx context.Context, req func() error, fallback Fallback, acceptable Acceptable) error
}

var (
	_ goZeroBreaker = (*SRE)(nil)
	_ goZeroBreaker = (*Circuit)(nil)
)

// breakers returns one of each breaker on a manual clock, and a function that
// makes it block every request.
func breakers(t *testing.T) map[string]struct {
	b     goZeroBreaker
	block func()
} {
	t.Helper()
	a, _, r := newSRE(t, WithProtection(0))
	c, _ := newCircuit(t, ErrorCount(5), WithMinRequests(1))
	return map[string]struct {
		b     goZeroBreaker
		block func()
	}{
		"SRE": {a, func() {
			outcomes(t, a, 0, 100)
			r.x = 0 // every draw is below the block ratio
		}},
		"Circuit": {c, func() {
			for c.State() == Closed {
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
				_ = tc.b.Do(func() error { panic(boom{7}) })
				t.Fatal("Do returned after a panic")
			}()
			if s := tc.b.Stats(); s.Failures != 1 || s.Requests != 1 {
				t.Fatalf("stats = %+v, want one failure", s)
			}
		})
	}
}

func TestDoWithFallbackRunsTheFallbackWhenBlocked(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			fallback := func(err error) error {
				if !errors.Is(err, ErrBlocked) {
					t.Fatalf("fallback got %v, want ErrBlocked", err)
				}
				return errors.New("served from cache")
			}
			if err := tc.b.DoWithFallback(func() error { return nil }, fallback); err != nil {
				t.Fatalf("allowed request: %v", err)
			}
			tc.block()
			ran := false
			err := tc.b.DoWithFallback(func() error { ran = true; return nil }, fallback)
			if ran || err == nil || err.Error() != "served from cache" {
				t.Fatalf("blocked request: ran = %v, err = %v; want the fallback's error", ran, err)
			}
			if err := tc.b.Do(func() error { ran = true; return nil }); ran || !errors.Is(err, ErrBlocked) {
				t.Fatalf("Do when blocked: ran = %v, err = %v", ran, err)
			}
		})
	}
}

func TestDoCtxReturnsAtOnceWhenTheContextIsDone(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			ran := false
			req := func() error { ran = true; return nil }
			fallback := func(error) error { ran = true; return nil }
			ok := func(error) bool { return true }
			for _, err := range []error{
				tc.b.DoCtx(ctx, req),
				tc.b.DoWithAcceptableCtx(ctx, req, ok),
				tc.b.DoWithFallbackCtx(ctx, req, fallback),
				tc.b.DoWithFallbackAcceptableCtx(ctx, req, fallback, ok),
			} {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
			}
			if _, err := tc.b.AllowCtx(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("AllowCtx: %v, want context.Canceled", err)
			}
			if s := tc.b.Stats(); ran || s.Requests != 0 || s.Blocked != 0 {
				t.Fatalf("ran = %v, stats = %+v; want nothing run or counted", ran, s)
			}
		})
	}
}

func TestDoCtxDoesNotCountTheCallersCancellation(t *testing.T) {
	for name, tc := range breakers(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			err := tc.b.DoCtx(ctx, func() error { cancel(); return ctx.Err() })
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			// A deadline is the dependency being too slow: a failure.
			dctx, dcancel := context.WithTimeout(context.Background(), 0)
			defer dcancel()
			<-dctx.Done()
			_ = tc.b.DoCtx(context.Background(), func() error { return dctx.Err() })
			// context.Canceled without the caller's ctx cancelled is a failure
			// like any other error.
			_ = tc.b.Do(func() error { return context.Canceled })
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
			p.Succeed()
			p.Fail()
			p.Ignore()
			p.Done(errors.New("x"))
			p.DoneAt(0, nil)
			p.RecordAt(0, Failure)
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

// A nil Acceptable leaves the decision to WithIsSuccessful, as its doc says.
func TestNilAcceptableUsesIsSuccessful(t *testing.T) {
	a, err := NewSRE(WithClock(clock.NewManual(0)), WithIsSuccessful(func(error) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	_ = a.DoWithAcceptable(func() error { return errors.New("boom") }, nil)
	if s := a.Stats(); s.Successes != 1 {
		t.Fatalf("stats = %+v, want the error taken as a success by WithIsSuccessful", s)
	}
}
