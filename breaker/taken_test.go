package breaker

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/breakerlimits"
	"github.com/slidegate/slidegate/window"
)

// newTakenModel returns the window.Counter that a taken must answer as:
// the default window, Succeeded and Failed.
func newTakenModel(t *testing.T) *window.Counter {
	t.Helper()
	m, err := window.NewCounter(breakerlimits.DefaultCircuitBuckets, breakerlimits.DefaultInterval, window.WithEvents(window.Succeeded, window.Failed))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWhatASharedWindowTakesAwayReadsAsACounterOfItsOwn drives a taken and
// a window.Counter with the same adds, at times that mostly go forwards,
// sometimes by more than the window, and sometimes go back, and compares
// every read after a random from.
func TestWhatASharedWindowTakesAwayReadsAsACounterOfItsOwn(t *testing.T) {
	width := int64(breakerlimits.DefaultInterval / breakerlimits.DefaultCircuitBuckets)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var x taken
		m := newTakenModel(t)
		now := rng.Int64N(1<<40) - 1<<39
		reads := 0
		for step := range 400 {
			switch r := rng.IntN(100); {
			case r < 50:
				now += rng.Int64N(width / 2)
			case r < 55:
				now += rng.Int64N(3 * int64(breakerlimits.DefaultInterval))
			}
			at := now
			if rng.IntN(8) == 0 {
				// An earlier time: in the window, or older than it.
				at -= rng.Int64N(2 * int64(breakerlimits.DefaultInterval))
			}
			if rng.IntN(3) > 0 {
				e := window.Succeeded
				if rng.IntN(2) == 0 {
					e = window.Failed
				}
				v := rng.Int64N(9) - 1 // -1 as settleShared gives back, 0, a batch
				if rng.IntN(50) == 0 {
					v = 1 << 41 // saturates, as a Counter's word does
				}
				x.addAt(at, e, v)
				m.AddAt(at, e, v)
				continue
			}
			from := now - rng.Int64N(int64(breakerlimits.DefaultInterval)+3*width)
			if rng.IntN(10) == 0 {
				from = now + rng.Int64N(width) // from after now reads nothing
			}
			gs, gf := x.sumsAfter(at, from)
			ws, wf := outcomesAfter(m, at, from)
			if gs != ws || gf != wf {
				t.Fatalf("seed %d step %d: sumsAfter(%d, %d) = %d, %d; a Counter reads %d, %d", seed, step, at, from, gs, gf, ws, wf)
			}
			reads++
		}
		if reads == 0 {
			t.Fatalf("seed %d: no read compared", seed)
		}
	}
}

// TestWhatASharedWindowTakesAwayLosesNothingToConcurrentAdders has
// goroutines add to a taken while others read it, round after round, each
// round in the next bucket: every tenth reuses a slot, and the adders race
// to reset it. Once a round's adds stop, each value added in it is read.
func TestWhatASharedWindowTakesAwayLosesNothingToConcurrentAdders(t *testing.T) {
	width := int64(breakerlimits.DefaultInterval / breakerlimits.DefaultCircuitBuckets)
	base := int64(time.Hour) // a bucket's start: the grid's starts are multiples of the width
	var x taken
	const adders, adds, rounds = 4, 1000, 25
	for r := range int64(rounds) {
		start := base + r*width
		go1 := make(chan struct{})
		stop := make(chan struct{})
		var wg, readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			<-go1
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, f := x.sumsAfter(start+width-1, start-1)
				if s < 0 || f < 0 || s > adders*adds || f > adders*adds {
					t.Errorf("round %d, a read mid-way: %d succeeded, %d failed; out of [0, %d]", r, s, f, adders*adds)
					return
				}
			}
		}()
		for g := range int64(adders) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-go1
				for i := range int64(adds) {
					e := window.Succeeded
					if i%2 == 1 {
						e = window.Failed
					}
					x.addAt(start+(g*adds+i)%width, e, 1)
				}
			}()
		}
		close(go1)
		wg.Wait()
		close(stop)
		readers.Wait()
		s, f := x.sumsAfter(start+width-1, start-1)
		if s != adders*adds/2 || f != adders*adds/2 {
			t.Fatalf("round %d, after the adds: %d succeeded, %d failed; want %d each", r, s, f, adders*adds/2)
		}
		// The round before, still in the window, kept its own.
		if r > 0 {
			if s, f := x.sumsAfter(start+width-1, start-width-1); s != adders*adds || f != adders*adds {
				t.Fatalf("round %d, two buckets: %d succeeded, %d failed; want %d each", r, s, f, adders*adds)
			}
		}
	}
}
