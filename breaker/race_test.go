package breaker

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// Many goroutines drive a Circuit through its states while the clock moves:
// no more than n probes are ever in flight, and every state change is one
// step of the state machine from the state the previous one left, with none
// lost or applied twice.
func TestCircuitConcurrentProbesAndTransitions(t *testing.T) {
	const probes, workers = 3, 8
	var mu sync.Mutex
	var told []Transition
	clk := clock.NewManual(0)
	var gens probeGens
	c, err := NewCircuit(ErrorRatio(0.5), WithClock(clk), WithMinRequests(5),
		WithOpenTimeout(10*time.Millisecond, 0), WithProbes(probes, time.Second), gens.option(),
		OnStateChange(func(tr Transition) { mu.Lock(); told = append(told, tr); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	var flight sync.Mutex
	inFlight := map[uint64]int{} // probes in flight by the state word that allowed them
	most := 0
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			src := rand.New(rand.NewPCG(seed, 3))
			for !stop.Load() {
				p, err := c.Allow()
				if err != nil {
					if !errors.Is(err, ErrBlocked) {
						t.Errorf("Allow: %v", err)
						return
					}
					continue
				}
				if ticketOf(p) != 0 {
					gen := gens.of(p)
					// Probes are counted per half-open generation: when one
					// ends, its probes still running are abandoned (their
					// results are ignored) and the next generation has n
					// places of its own.
					flight.Lock()
					inFlight[gen]++
					most = max(most, inFlight[gen])
					flight.Unlock()
					runtime.Gosched() // hold the place while others ask for one
					// Leave the count before settling: settling frees the
					// place for the next probe.
					flight.Lock()
					inFlight[gen]--
					flight.Unlock()
				}
				switch src.IntN(10) { // an error ratio of 5/9 in the long run
				case 0, 1, 2, 3, 4:
					p.settle(Failure)
				case 5:
					p.settle(Ignored)
				default:
					p.settle(Success)
				}
			}
		}(uint64(w))
	}
	// Move the clock in steps of the open timeout; stop before the listener
	// could fall behind by its queue's length.
	for c.Stats().Generation < 50 {
		clk.Advance(10 * time.Millisecond)
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	gen := c.Stats().Generation
	c.notify.Running.Wait() // every change told
	if most > probes || most == 0 {
		t.Fatalf("%d probes of one generation in flight at once, limit %d", most, probes)
	}
	if d := c.notify.Dropped(); d != 0 {
		t.Fatalf("%d transitions dropped", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if uint64(len(told)) != gen {
		t.Fatalf("told %d transitions, generation %d", len(told), gen)
	}
	state := Closed
	for i, tr := range told {
		ok := tr.From == state && tr.Generation == uint64(i+1) && tr.From != tr.To &&
			!(tr.From == Closed && tr.To == HalfOpen) && !(tr.From == Open && tr.To == Closed)
		if !ok {
			t.Fatalf("transition %d = %+v after state %v", i, tr, state)
		}
		state = tr.To
	}
	if state != c.current() {
		t.Fatalf("last transition to %v, state %v", state, c.current())
	}
}

// Concurrent requests on an SRE breaker are all counted.
func TestSREConcurrentOutcomesAreCounted(t *testing.T) {
	clk := clock.NewManual(0)
	a, err := NewSRE(WithClock(clk), withK(1e9)) // K so large that nothing is blocked
	if err != nil {
		t.Fatal(err)
	}
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	boom := errors.New("boom")
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				_ = a.Do(bg, func() error {
					if i%4 == 0 {
						return boom
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	if s := a.Stats(); s.Requests != workers*per || s.Failures != workers*per/4 || s.Blocked != 0 {
		t.Fatalf("stats = %+v, want %d requests, %d failures", s, workers*per, workers*per/4)
	}
}

// When a probe is due, one request gets it, however many ask at once.
func TestSRELetsOneProbeThroughWhenManyAskAtOnce(t *testing.T) {
	a, err := NewSRE(WithClock(clock.NewManual(0)), withProtection(0), withRandom(func() float64 { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.AllowAt(0); err != nil {
		t.Fatal(err)
	} else {
		p.recordAt(0, Failure) // a block ratio of 1/2; every draw blocks
	}
	const workers, each = 8, 200
	for round := int64(1); round <= 5; round++ {
		now := round * int64(time.Second) // a probe is due
		var allowed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < each; i++ {
					if _, err := a.AllowAt(now); err == nil {
						allowed.Add(1)
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if n := allowed.Load(); n != 1 {
			t.Fatalf("at %ds: %d of %d requests let through, want one probe", round, n, workers*each)
		}
	}
}
