package breaker_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/breakerhook"
)

// withRandom makes an SRE breaker draw from a source of its own: here a
// seeded one, so that the example prints the same every run.
var withRandom = breakerhook.WithRandom.(func(func() float64) breaker.Option)

// policyNames names the block policies in the table.
var policyNames = map[breaker.BlockPolicy]string{
	breaker.CountBlocksWhileFailing: "count blocks while failing",
	breaker.CountBlocks:             "count blocks",
	breaker.IgnoreBlocks:            "ignore blocks",
}

// A scenario sends evenly spaced requests through an SRE breaker on a
// simulated timeline (AllowAt and DoneAt take the time, so nothing sleeps)
// to a dependency that fails every request during an outage and, outside it,
// handles at most capacity requests per second (0: all) and fails the rest.
type scenario struct {
	rate             int // requests per second
	outage, recovery time.Duration
	capacity         int
	length           time.Duration
}

// A result is what a scenario measured.
type result struct {
	leak     float64       // requests per second reaching the dependency in the second half of the outage
	recovery time.Duration // from the outage's end until the block ratio is at most 1%; -1 if never
	sent     float64       // requests per second reaching the dependency in the second half of the run
	// after[s] is the share of the requests offered in [s, s+1) seconds
	// after the outage that reached the dependency.
	after []float64
}

func (sc scenario) run(policy breaker.BlockPolicy, seed uint64) result {
	src := rand.New(rand.NewPCG(seed, 1))
	b, err := breaker.NewSRE(breaker.WithBlockPolicy(policy), withRandom(src.Float64))
	if err != nil {
		panic(err)
	}
	sec := int64(time.Second)
	step := sec / int64(sc.rate)
	outage, recovery := int64(sc.outage), int64(sc.recovery)
	res := result{recovery: -1}
	if recovery > 0 {
		res.after = make([]float64, (int64(sc.length)-recovery)/sec)
	}
	var leaked, sent, served int64
	for now := int64(0); now < int64(sc.length); now += step {
		if now%sec < step {
			served = 0 // a new second for the dependency's capacity
		}
		down := now >= outage && now < recovery
		if recovery > 0 && now >= recovery && res.recovery < 0 && b.StatsAt(now).BlockRatio <= 0.01 {
			res.recovery = time.Duration(now - recovery)
		}
		p, err := b.AllowAt(now)
		if err != nil {
			continue // blocked
		}
		if down && now >= (outage+recovery)/2 {
			leaked++
		}
		if now >= int64(sc.length)/2 {
			sent++
		}
		if recovery > 0 && now >= recovery && int((now-recovery)/sec) < len(res.after) {
			res.after[(now-recovery)/sec]++
		}
		if down || (sc.capacity > 0 && served >= int64(sc.capacity)) {
			p.DoneAt(now, errDown)
			continue
		}
		served++
		p.DoneAt(now, nil)
	}
	if d := recovery - outage; d > 0 {
		res.leak = float64(leaked) / time.Duration(d/2).Seconds()
	}
	res.sent = float64(sent) / (sc.length / 2).Seconds()
	for s := range res.after {
		res.after[s] /= float64(sc.rate)
	}
	return res
}

// The three block policies at 1,000 requests per second with the default
// window (10 s) and K (2): a one-minute outage, the share of the requests
// let through in the seconds starting 1, 4, 8 and 30 s after it, and an
// overload where the dependency handles 100 requests per second.
func ExampleBlockPolicy() {
	outage := scenario{rate: 1000, outage: 10 * time.Second, recovery: 70 * time.Second, length: 200 * time.Second}
	overload := scenario{rate: 1000, capacity: 100, length: 120 * time.Second}
	fmt.Println("policy                     | outage leak | let through at  +1 s  +4 s  +8 s +30 s | overload: sent per second")
	for _, p := range []breaker.BlockPolicy{breaker.CountBlocksWhileFailing, breaker.CountBlocks, breaker.IgnoreBlocks} {
		o, l := outage.run(p, 1), overload.run(p, 1)
		fmt.Printf("%-26v | %6.1f/s    |               %4.0f%% %4.0f%% %4.0f%% %4.0f%% | %4.0f (%.1f × capacity)\n",
			policyNames[p], o.leak, 100*o.after[1], 100*o.after[4], 100*o.after[8], 100*o.after[30], l.sent, l.sent/100)
	}
	// Output:
	// policy                     | outage leak | let through at  +1 s  +4 s  +8 s +30 s | overload: sent per second
	// count blocks while failing |    1.4/s    |                 21%   66%  100%  100% |  201 (2.0 × capacity)
	// count blocks               |    1.4/s    |                  0%    0%    0%   15% |  201 (2.0 × capacity)
	// ignore blocks              |   24.9/s    |                100%  100%  100%  100% |  448 (4.5 × capacity)
}
