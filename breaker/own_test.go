package breaker_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// recordAt is how the guard settles a Promise with an outcome it has
// classified itself.
var recordAt = breakerhook.RecordAt.(func(breaker.Promise, int64, breaker.Outcome))

// pause is a Breaker of its own: it blocks every request for a second after
// a failure.
type pause struct {
	clk   clock.Clock
	until atomic.Int64 // blocking until then
	calls atomic.Int64 // the token of the next Promise
	told  []string     // what its Promises reported, for the test
}

func (b *pause) Now() int64 { return b.clk.Now() }

func (b *pause) RecordAt(token uint64, now int64, o breaker.Outcome) {
	b.told = append(b.told, fmt.Sprintf("%d:%d@%d", token, o, now))
	if o == breaker.Failure {
		b.until.Store(now + int64(time.Second))
	}
}

func (b *pause) Allow() (breaker.Promise, error) { return b.AllowAt(b.clk.Now()) }

func (b *pause) AllowAt(now int64) (breaker.Promise, error) {
	if now < b.until.Load() {
		return breaker.Promise{}, breaker.ErrBlocked
	}
	return breaker.NewPromise(b, uint64(b.calls.Add(1))), nil
}

func (b *pause) Stats() breaker.Stats { return b.StatsAt(b.clk.Now()) }

func (b *pause) StatsAt(now int64) breaker.Stats {
	if now < b.until.Load() {
		return breaker.Stats{State: breaker.Open, BlockRatio: 1, RetryAfter: time.Duration(b.until.Load() - now)}
	}
	return breaker.Stats{}
}

var _ breaker.Breaker = (*pause)(nil)

// A Breaker of your own makes its Promises with NewPromise, and is told
// their outcomes as their Recorder.
func ExampleNewPromise() {
	clk := clock.NewManual(0)
	var b breaker.Breaker = &pause{clk: clk}
	p, _ := b.Allow()
	p.Done(errors.New("down")) // a failure: blocked for a second
	_, err := b.Allow()
	fmt.Println(err, b.Stats().RetryAfter)
	clk.Advance(time.Second)
	p, err = b.Allow()
	fmt.Println(err, p.Probe())
	// Output:
	// breaker: blocked 1s
	// <nil> false
}

// Every way of settling a Promise of your own tells its Recorder once, with
// its token, the outcome and the time: the Recorder's own time when the
// method reads no clock. A nil error is a success, any other a failure; the
// guard's settling with an outcome of its own tells that outcome.
func TestAPromiseOfYourOwnReportsToItsRecorder(t *testing.T) {
	clk := clock.NewManual(5)
	b := &pause{clk: clk}
	p := breaker.NewPromise(b, 7)
	if p.Probe() {
		t.Fatal("a Promise of your own is a probe")
	}
	p.Done(nil)
	p.DoneAt(9, nil)
	recordAt(p, 11, breaker.Ignored)
	recordAt(p, 12, breaker.Outcome(9)) // not an Outcome: nothing told
	p.DoneAt(13, errors.New("x"))
	p.Done(errors.New("x"))
	want := fmt.Sprint([]string{"7:0@5", "7:0@9", "7:2@11", "7:1@13", "7:1@5"})
	if got := fmt.Sprint(b.told); got != want {
		t.Fatalf("told %v, want %v", got, want)
	}
	var zero breaker.Promise
	zero.Done(nil)
	zero.DoneAt(1, nil)
	recordAt(zero, 1, breaker.Failure) // the zero Promise ignores every call
	if len(b.told) != 5 {
		t.Fatalf("the zero Promise told %v", b.told[5:])
	}
}

// counting is a Recorder that counts what it is told.
type counting struct{ n atomic.Int64 }

func (c *counting) Now() int64                              { return 0 }
func (c *counting) RecordAt(uint64, int64, breaker.Outcome) { c.n.Add(1) }

// Making and settling a Promise of your own allocates nothing.
func TestAPromiseOfYourOwnAllocatesNothing(t *testing.T) {
	var r counting
	if n := testing.AllocsPerRun(1000, func() { breaker.NewPromise(&r, 1).Done(nil) }); n != 0 {
		t.Fatalf("%v allocations per Promise", n)
	}
	if r.n.Load() == 0 {
		t.Fatal("nothing told")
	}
}
