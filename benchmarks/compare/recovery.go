package compare

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	zbreaker "github.com/zeromicro/go-zero/core/breaker"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// A Recovery is the scenario of the breakers' recovery comparison: Rate
// requests a second, evenly spaced, to a dependency that handles every
// request for Healthy (a window's worth, so that the outage starts from a
// full window), fails every request for Outage, then handles every request
// again for After seconds.
type Recovery struct {
	Rate            int
	Healthy, Outage time.Duration
	After           int
}

// DefaultRecovery is the scenario of BENCHMARKS.md: 1,000 requests a second,
// a 10 s outage after 10 s of health, 12 s measured after it.
var DefaultRecovery = Recovery{Rate: 1000, Healthy: 10 * time.Second, Outage: 10 * time.Second, After: 12}

// A RecoveryRow is what one breaker let through in a Recovery.
type RecoveryRow struct {
	Breaker string
	// Outage is the share of the requests offered during the outage that
	// the breaker let through (to a dependency that failed them all).
	Outage float64
	// After[s] is the share of the requests offered in [s, s+1) seconds
	// after the outage that the breaker let through.
	After []float64
}

// recoveryBreaker is one breaker of the comparison: allow asks it whether
// the request at time now may go, and returns how to report its outcome.
type recoveryBreaker interface {
	allow(now time.Duration) (settle func(now time.Duration, ok bool), allowed bool)
}

// A count tallies what one breaker let through in a run.
type count struct {
	b                     recoveryBreaker
	outage, outageAllowed int
	after, afterAllowed   []int
}

// offer offers the breaker the request at time now, in scenario sc.
func (c *count) offer(sc Recovery, now time.Duration) {
	down, up := sc.Healthy, sc.Healthy+sc.Outage
	settle, ok := c.b.allow(now)
	switch {
	case now < down:
	case now < up:
		c.outage++
		if ok {
			c.outageAllowed++
		}
	default:
		s := int((now - up) / time.Second)
		c.after[s]++
		if ok {
			c.afterAllowed[s]++
		}
	}
	if ok {
		settle(now, now < down || now >= up)
	}
}

func (c *count) row(name string) RecoveryRow {
	r := RecoveryRow{Breaker: name, Outage: shareOf(c.outageAllowed, c.outage), After: make([]float64, len(c.after))}
	for s := range c.after {
		r.After[s] = shareOf(c.afterAllowed[s], c.after[s])
	}
	return r
}

func shareOf(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func newCount(b recoveryBreaker, sc Recovery) *count {
	return &count{b: b, after: make([]int, sc.After), afterAllowed: make([]int, sc.After)}
}

// end is when the scenario ends.
func (sc Recovery) end() time.Duration {
	return sc.Healthy + sc.Outage + time.Duration(sc.After)*time.Second
}

// RecoveryInRealTime runs the scenario in real time, the only time go-zero's
// breaker reads (timex), for go-zero's default breaker (NewBreaker) and
// slidegate's default SRE breaker on clock.System, side by side: each
// request, when it is due, is offered to both, and each tells its own
// dependency the outcome at once. It takes the scenario's length: 32 s for
// DefaultRecovery.
func RecoveryInRealTime(sc Recovery) ([]RecoveryRow, error) {
	a, err := breaker.NewSRE()
	if err != nil {
		return nil, err
	}
	goZero := newCount(goZeroBreaker{zbreaker.NewBreaker()}, sc)
	ours := newCount(slidegateBreaker{a, nil}, sc)
	step := time.Second / time.Duration(sc.Rate)
	start := time.Now()
	for i := time.Duration(0); i*step < sc.end(); i++ {
		if wait := i*step - time.Since(start); wait > 0 {
			time.Sleep(wait) // a late request goes at once: the run keeps its rate
		}
		// Both breakers see the request at the time they read, within
		// a few microseconds; the scenario's phases go by the same time.
		now := time.Since(start)
		if now >= sc.end() {
			break
		}
		goZero.offer(sc, now)
		ours.offer(sc, now)
	}
	return []RecoveryRow{goZero.row("go-zero v1.10.3 breaker (real time)"), ours.row("slidegate SRE (real time)")}, nil
}

// withRandom makes an SRE breaker draw from a source of its own (breaker
// keeps it out of its API, for tests and simulations).
var withRandom = breakerhook.WithRandom.(func(func() float64) breaker.Option)

// policyNames names the block policies in the rows.
var policyNames = map[breaker.BlockPolicy]string{
	breaker.CountBlocksWhileFailing: "count blocks while failing",
	breaker.CountBlocks:             "count blocks",
}

// RecoverySimulated runs the scenario on a manual clock for slidegate's
// SRE breaker under each block policy, drawing from a PCG seeded with
// seed: deterministic, and instant.
func RecoverySimulated(sc Recovery, seed uint64) ([]RecoveryRow, error) {
	var rows []RecoveryRow
	for _, p := range []breaker.BlockPolicy{breaker.CountBlocksWhileFailing, breaker.CountBlocks} {
		clk := clock.NewManual(0)
		a, err := breaker.NewSRE(breaker.WithClock(clk), breaker.WithBlockPolicy(p),
			withRandom(rand.New(rand.NewPCG(seed, 1)).Float64))
		if err != nil {
			return nil, err
		}
		c := newCount(slidegateBreaker{a, clk}, sc)
		step := time.Second / time.Duration(sc.Rate)
		for now := time.Duration(0); now < sc.end(); now += step {
			c.offer(sc, now)
		}
		rows = append(rows, c.row(fmt.Sprintf("slidegate SRE, %s (simulated)", policyNames[p])))
	}
	return rows, nil
}

// goZeroBreaker is go-zero's breaker: Allow and its promise, on go-zero's
// own clock.
type goZeroBreaker struct{ b zbreaker.Breaker }

func (g goZeroBreaker) allow(time.Duration) (func(time.Duration, bool), bool) {
	p, err := g.b.Allow()
	if err != nil {
		return nil, false
	}
	return func(_ time.Duration, ok bool) {
		if ok {
			p.Accept()
		} else {
			p.Reject("dependency down")
		}
	}, true
}

// slidegateBreaker is slidegate's SRE breaker: on clock.System when clk
// is nil, else on virtual time, at the scenario's times.
type slidegateBreaker struct {
	a   *breaker.SRE
	clk *clock.Manual
}

func (s slidegateBreaker) allow(now time.Duration) (func(time.Duration, bool), bool) {
	var p breaker.Promise
	var err error
	if s.clk == nil {
		p, err = s.a.Allow()
	} else {
		p, err = s.a.AllowAt(int64(now))
	}
	if err != nil {
		return nil, false
	}
	return func(now time.Duration, ok bool) {
		switch {
		case s.clk != nil && ok:
			p.DoneAt(int64(now), nil)
		case s.clk != nil:
			p.DoneAt(int64(now), errDependency)
		case ok:
			p.Done(nil) // at the breaker's clock
		default:
			p.Done(errDependency)
		}
	}, true
}

// WriteRecoveryTable writes rows as a markdown table: a column per breaker,
// a row per second after the outage, the share let through, and a last row
// for the outage.
func WriteRecoveryTable(w io.Writer, rows []RecoveryRow) error {
	var b strings.Builder
	b.WriteString("| after the outage |")
	for _, r := range rows {
		b.WriteString(" " + r.Breaker + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|", len(rows)) + "\n")
	n := 0
	for _, r := range rows {
		n = max(n, len(r.After))
	}
	for s := 0; s < n; s++ {
		fmt.Fprintf(&b, "| +%d s |", s)
		for _, r := range rows {
			if s < len(r.After) {
				fmt.Fprintf(&b, " %.1f %% |", 100*r.After[s])
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| during the outage |")
	for _, r := range rows {
		fmt.Fprintf(&b, " %.1f %% |", 100*r.Outage)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
