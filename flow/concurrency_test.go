package flow

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
)

func TestConcurrencyNeverExceedsTheLimitUnderRace(t *testing.T) {
	const limit, goroutines = 5, 16
	c, err := NewConcurrency(ConcurrencySettings{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var inside, peak, allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				var p Permit
				if !c.Acquire(&p, "").Allowed {
					continue
				}
				allowed.Add(1)
				now := inside.Add(1)
				for {
					old := peak.Load()
					if now <= old || peak.CompareAndSwap(old, now) {
						break
					}
				}
				inside.Add(-1)
				p.Done(Succeeded)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("%d requests were inside at once, limit %d", p, limit)
	}
	if allowed.Load() == 0 {
		t.Fatal("nothing allowed")
	}
	if got := c.InFlight(""); got != 0 {
		t.Fatalf("InFlight = %d after every permit was released", got)
	}
}

func TestConcurrencyPermitReleaseIsIdempotent(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 2})
	var a, b Permit
	if !c.AcquireN(&a, "", 2).Allowed {
		t.Fatal("AcquireN(2) blocked on an empty limiter")
	}
	if d := c.Acquire(&b, ""); d.Allowed || d.Reason != ConcurrencyLimited {
		t.Fatalf("third place: %+v, want ConcurrencyLimited", d)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ { // racing releases of one permit release once
		wg.Add(1)
		go func() { defer wg.Done(); a.Done(Succeeded) }()
	}
	wg.Wait()
	if got := c.InFlight(""); got != 0 {
		t.Fatalf("InFlight = %d after releasing a permit of 2 many times", got)
	}
	var zero Permit
	zero.Done(Succeeded)
	b.Done(Succeeded) // never allowed
	if got := c.InFlight(""); got != 0 {
		t.Fatalf("InFlight = %d after releasing permits that hold nothing", got)
	}
	// A released Permit can be reused for a new request.
	if !c.Acquire(&a, "").Allowed || c.InFlight("") != 1 {
		t.Fatal("reusing a released Permit failed")
	}
	a.Done(Succeeded)
	a.Done(Succeeded)
	if c.InFlight("") != 0 {
		t.Fatal("reused Permit released twice")
	}
}

func TestConcurrencyEdgeCases(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 3})
	var p Permit
	if d := c.AcquireN(&p, "", 4); d.Reason != ExceedsLimit {
		t.Fatalf("4 places of 3: %+v", d)
	}
	if d := c.AcquireN(&p, "", 0); !d.Allowed || c.InFlight("") != 0 {
		t.Fatal("0 places must be allowed and take nothing")
	}
	p.Done(Succeeded) // holds nothing
	if d := c.AcquireN(&p, "", 3); !d.Allowed || c.InFlight("") != 3 {
		t.Fatalf("3 places of 3: %+v, in flight %d", d, c.InFlight(""))
	}
	var q Permit
	if d := c.Acquire(&q, ""); d.Reason != ConcurrencyLimited || d.RetryAfter != 0 {
		t.Fatalf("a fourth place: %+v, want ConcurrencyLimited with no RetryAfter", d)
	}
	q.Done(Succeeded) // was never filled: gives nothing back
	p.Done(Succeeded)
	if c.InFlight("") != 0 || c.limitNow() != 3 {
		t.Fatalf("InFlight %d, Limit %d", c.InFlight(""), c.limitNow())
	}
	if _, err := NewConcurrency(ConcurrencySettings{Limit: -1}); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("NewConcurrency(-1): %v", err)
	}
}

func TestConcurrencyDoesNotAllocate(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencySettings{Limit: 10})
	if n := testing.AllocsPerRun(1000, func() {
		var p Permit
		c.Acquire(&p, "")
		p.Done(Succeeded)
	}); n != 0 {
		t.Fatalf("Acquire and Release allocate %.1f times", n)
	}
}
