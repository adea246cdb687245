package slidegate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"weak"
)

// TestAResourceHandleDecidesAsEnterByName drives two guards on one manual
// clock with the same random requests and reloads: one enters by name, the
// other through handles made once. Every decision and every resource's
// statistics must be the same, across rules set, changed and removed, and
// across resources evicted from a full table and made again.
func TestAResourceHandleDecidesAsEnterByName(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	ruleSets := []Rules{
		{},
		{Flow: []FlowRule{{Resource: "a", Limit: 3}}, Breakers: []BreakerRule{{Resource: "a", Strategy: ConsecutiveFailuresBreaker, Count: 2}}},
		{Flow: []FlowRule{{Resource: "a", Limit: 5}, {Resource: "b", Limit: 2}, {Resource: InboundResource, Limit: 4}}},
		{Flow: []FlowRule{{Resource: "c", Type: ConcurrencyRule, Limit: 1}, {Resource: "d", Limit: 1, PerKey: true}}},
	}
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			byName, clk := newGuard(t, Rules{}, WithMaxResources(2))
			handled, err := New(WithClock(clk), WithMaxResources(2))
			if err != nil {
				t.Fatal(err)
			}
			handles := map[string]*Resource{}
			for _, n := range names {
				handles[n] = handled.Resource(n)
			}
			type open struct{ byName, handled Entry }
			var inFlight []open
			for step := range 600 {
				switch op := rng.IntN(20); {
				case op == 0:
					rules := ruleSets[rng.IntN(len(ruleSets))]
					if err1, err2 := byName.SetRules(rules), handled.SetRules(rules); err1 != nil || err2 != nil {
						t.Fatalf("step %d: SetRules: %v, %v", step, err1, err2)
					}
				case op < 4:
					clk.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
				case op < 8 && len(inFlight) > 0:
					i := rng.IntN(len(inFlight))
					var err error
					if rng.IntN(3) == 0 {
						err = errors.New("failed")
					}
					inFlight[i].byName.Exit(err)
					inFlight[i].handled.Exit(err)
					inFlight = append(inFlight[:i], inFlight[i+1:]...)
				default:
					name := names[rng.IntN(len(names))]
					var opts []EntryOption
					if rng.IntN(3) == 0 {
						opts = append(opts, WithInbound())
					}
					if rng.IntN(2) == 0 {
						opts = append(opts, WithKey(fmt.Sprint(rng.IntN(3))))
					}
					e1, err1 := byName.Enter(bg, name, opts...)
					e2, err2 := handles[name].Enter(bg, opts...)
					if fmt.Sprint(err1) != fmt.Sprint(err2) {
						t.Fatalf("step %d: %s: by name %v, through the handle %v", step, name, err1, err2)
					}
					if err1 == nil {
						inFlight = append(inFlight, open{e1, e2})
					}
				}
				for _, n := range append(names, OtherResource, InboundResource) {
					s1, ok1 := byName.Stats(n)
					s2, ok2 := handled.Stats(n)
					if ok1 != ok2 || s1 != s2 {
						t.Fatalf("step %d: %s: by name %+v (%v), through handles %+v (%v)", step, n, s1, ok1, s2, ok2)
					}
				}
			}
		})
	}
}

// TestAResourceHandleCountsUnderItsNameOnceTheTableHasRoom checks the two
// ways a handle's resource leaves the table: evicted while idle, and
// counted as OtherResource while the table is full. Its next request is
// counted where a request by name would be.
func TestAResourceHandleCountsUnderItsNameOnceTheTableHasRoom(t *testing.T) {
	g, clk := newGuard(t, Rules{}, WithMaxResources(1))
	a := g.Resource("a")
	enter := func(r *Resource) {
		t.Helper()
		e, err := r.Enter(bg)
		if err != nil {
			t.Fatal(err)
		}
		e.Exit(nil)
	}
	enter(a)
	if s := stats(t, g, "a"); s.Allowed != 1 {
		t.Fatalf("a: %+v, want one request", s)
	}
	clk.Advance(statsInterval + 2*time.Second)
	mustEnter(t, g, "b").Exit(nil) // evicts a, idle for a whole window
	if _, ok := g.Stats("a"); ok {
		t.Fatal("a was not evicted")
	}
	enter(a) // the table is full of b, busy: counted as OtherResource
	if s := stats(t, g, OtherResource); s.Allowed != 1 {
		t.Fatalf("%s: %+v, want the handle's request", OtherResource, s)
	}
	if _, ok := g.Stats("a"); ok {
		t.Fatal("a came back in a full table")
	}
	clk.Advance(statsInterval + 2*time.Second)
	enter(a) // b idle now: a is made again, and counts its own
	if s := stats(t, g, "a"); s.Allowed != 1 {
		t.Fatalf("a: %+v, want the handle's request under its own name", s)
	}
	enter(a)
	if s := stats(t, g, "a"); s.Allowed != 2 {
		t.Fatalf("a: %+v, want both requests under its own name", s)
	}
}

// TestAResourceHandleFollowsTheRules checks that a handle made before
// the rules are set obeys them, and stops obeying them once removed.
func TestAResourceHandleFollowsTheRules(t *testing.T) {
	g, _ := newGuard(t, Rules{})
	a := g.Resource("a")
	e, err := a.Enter(bg)
	if err != nil {
		t.Fatal(err)
	}
	e.Exit(nil)
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "a", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Enter(bg); err != nil {
		t.Fatal(err)
	}
	var be *BlockError
	if _, err := a.Enter(bg); !errors.As(err, &be) || be.Rule != "qps" {
		t.Fatalf("second request under a limit of 1: %v, want blocked by qps", err)
	}
	if err := g.SetRules(Rules{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Enter(bg); err != nil {
		t.Fatalf("no rules: %v", err)
	}
	long := g.Resource(string(make([]byte, 300)))
	if e, err := long.Enter(bg); err != nil {
		t.Fatal(err)
	} else {
		e.Exit(nil)
	}
	if s := stats(t, g, OtherResource); s.Allowed != 1 {
		t.Fatalf("a name over 256 bytes: %s %+v, want its request", OtherResource, s)
	}
}

// TestAnIdleResourceHandleKeepsNoReplacedRules: a handle entered under
// some rules and left idle once they are replaced keeps at most its own
// resource's binding, not the replaced snapshot of every rule.
func TestAnIdleResourceHandleKeepsNoReplacedRules(t *testing.T) {
	g, _ := newGuard(t, Rules{Flow: []FlowRule{{Resource: "a", Limit: 5}, {Resource: "b", Limit: 5}}})
	a := g.Resource("a")
	e, err := a.Enter(bg)
	if err != nil {
		t.Fatal(err)
	}
	e.Exit(nil)
	replaced := weak.Make(g.snap.Load())
	other := weak.Make(g.snap.Load().by["b"])
	if err := g.SetRules(Rules{}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	if replaced.Value() != nil {
		t.Fatal("the replaced rules are still reachable while a handle entered under them is idle")
	}
	if other.Value() != nil {
		t.Fatal("another resource's binding is still reachable while a handle entered under the replaced rules is idle")
	}
	runtime.KeepAlive(a)
}
