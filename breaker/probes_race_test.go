package breaker

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Stress tests of the half-open state on the real clock, with an open
// timeout of 1 ns so that the circuit cycles closed → open → half-open as
// fast as workers can drive it. More Ps than CPUs let the OS preempt threads
// anywhere, which opens the windows between atomic steps. Each runs until the
// circuit has been through stressGenerations states.
const stressGenerations = 20000

func stressCircuit(t *testing.T, probes int, opts ...Option) *Circuit {
	t.Helper()
	t.Cleanup(func() { runtime.GOMAXPROCS(runtime.GOMAXPROCS(8)) })
	c, err := NewCircuit(ErrorRatio(0.5), append([]Option{WithMinRequests(1),
		WithOpenTimeout(time.Nanosecond, 0), WithProbes(probes, time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.closeListener)
	return c
}

// While a probe is in flight and its generation is current, its place holds
// its ticket and its start time: nothing else frees the place (which would
// let more than n probes in and lose the probe's own outcome) or overwrites
// its start (an older time would be a timeout that never happened).
func TestCircuitProbePlaceIsNeverTakenFromItsHolder(t *testing.T) {
	const probes = 2
	var gens probeGens
	c := stressCircuit(t, probes, gens.option())
	var stolen, clobbered, overfull atomic.Int64
	var flight sync.Mutex
	inFlight := map[uint64]int{}
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			src := rand.New(rand.NewPCG(seed, 7))
			for c.Stats().Generation < stressGenerations {
				p, err := c.Allow()
				if err != nil {
					runtime.Gosched()
					continue
				}
				ticket := ticketOf(p)
				if ticket == 0 {
					p.settle(Failure) // closed: trip at once
					continue
				}
				gen := gens.of(p)
				flight.Lock()
				if inFlight[gen]++; inFlight[gen] > probes {
					overfull.Add(1)
				}
				flight.Unlock()
				// Nil once the circuit has closed; while the state word
				// is the probe's, it is the probe's spell's.
				a := c.away.Load()
				for i := 0; i < 3 && a != nil; i++ {
					place := &a.probes[slotOf(ticket)]
					s1 := c.state.Load()
					tk, start := place.ticket.Load(), place.start.Load()
					if s2 := c.state.Load(); s1 == gen && s2 == gen {
						if tk != ticket {
							stolen.Add(1)
						} else if start != p.start {
							clobbered.Add(1)
						}
					}
					runtime.Gosched()
				}
				flight.Lock()
				inFlight[gen]--
				flight.Unlock()
				switch src.IntN(5) {
				case 0, 1:
					p.settle(Failure)
				case 2:
					p.settle(Ignored)
				default:
					p.settle(Success)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	if n, m, o := stolen.Load(), clobbered.Load(), overfull.Load(); n+m+o != 0 {
		t.Fatalf("a current probe's place was freed by someone else %d times, its start overwritten %d times; more than %d probes of one generation in flight %d times", n, m, probes, o)
	}
}

// A half-open generation closes only after n of its own probes succeeded: a
// late success of an earlier generation never counts towards a later one.
func TestCircuitClosesOnlyOnItsOwnProbesSuccesses(t *testing.T) {
	const probes = 2
	var mu sync.Mutex
	succeeded := map[uint64]int{} // Succeed calls of probes, by half-open generation
	var closedFrom []uint64       // half-open generations that closed
	var gens probeGens
	c := stressCircuit(t, probes, gens.option(), OnStateChange(func(tr Transition) {
		if tr.From == HalfOpen && tr.To == Closed {
			mu.Lock()
			closedFrom = append(closedFrom, tr.Generation-1)
			mu.Unlock()
		}
	}))
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			src := rand.New(rand.NewPCG(seed, 9))
			for c.Stats().Generation < stressGenerations {
				p, err := c.Allow()
				if err != nil {
					runtime.Gosched()
					continue
				}
				if ticketOf(p) == 0 || src.IntN(2) == 0 {
					p.settle(Failure)
					continue
				}
				gen := gens.of(p)
				mu.Lock()
				succeeded[gen>>2]++ // counted before it can count
				mu.Unlock()
				p.settle(Success)
			}
		}(uint64(w))
	}
	wg.Wait()
	c.notify.Running.Wait() // every change told
	mu.Lock()
	defer mu.Unlock()
	for _, g := range closedFrom {
		if succeeded[g] < probes {
			t.Fatalf("half-open generation %d closed after %d successful probes of its own, want %d", g, succeeded[g], probes)
		}
	}
	if len(closedFrom) == 0 {
		t.Fatal("the circuit never closed")
	}
}

// probeGens tells the half-open generation a probe was allowed in, which its
// Promise does not carry. It hears every change to HalfOpen with the
// circuit's lock held (onTransition), when the spell's first ticket will
// be the next one issued: a ticket's spell is the last that began at or
// below its sequence number.
type probeGens struct {
	mu    sync.Mutex
	first []uint64 // the first ticket sequence of each half-open spell, in order
	words []uint64 // its state word
}

func (g *probeGens) option() Option {
	return onTransition(func(c *Circuit, tr Transition) {
		if tr.To == HalfOpen {
			g.mu.Lock()
			g.first = append(g.first, c.tickets+1)
			g.words = append(g.words, tr.Generation<<2|uint64(HalfOpen))
			g.mu.Unlock()
		}
	})
}

// of returns the state word that allowed the request of p.
func (g *probeGens) of(p Promise) uint64 {
	t := ticketOf(p)
	if t == 0 {
		return p.token
	}
	seq := t >> ticketShift
	g.mu.Lock()
	defer g.mu.Unlock()
	i, _ := slices.BinarySearch(g.first, seq+1) // the spells that began at or below seq
	return g.words[i-1]
}

// ticketOf returns the ticket of a probe's Promise, or 0.
func ticketOf(p Promise) uint64 {
	if p.token&probeBit == 0 {
		return 0
	}
	return p.token &^ probeBit
}
