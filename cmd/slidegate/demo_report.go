package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// A reporter prints the demo's line a second, and a line for each shed
// rule starting or stopping to shed. Breakers tell their changes
// themselves (printEvents).
type reporter struct {
	g     *slidegate.Guard
	start time.Time
	out   io.Writer
	// cpu is what the shed rules read, beside the cgroup's usage; nil when
	// they read a fixed share, the cgroup, or nothing.
	cpu *ownCPU
	// warm is the usage from which other work would make a shed rule that
	// read the cgroup cap the traffic: half the lowest threshold.
	warm float64

	states    map[string]string           // each shed rule's state, as last printed
	prev      map[string]slidegate.Totals // each endpoint's totals at the last line
	peak      map[string]int64            // the most in flight under each adaptive rule since the last line
	saidOther bool                        // the line on other work's CPU is printed
}

func newReporter(g *slidegate.Guard, start time.Time, out io.Writer, own *ownCPU) *reporter {
	r := &reporter{g: g, start: start, out: out, cpu: own, warm: 1,
		states: map[string]string{}, prev: map[string]slidegate.Totals{}, peak: map[string]int64{}}
	for _, f := range g.Rules().Flow {
		if f.Type == slidegate.ShedRule && f.CPUThreshold >= 0 {
			t := f.CPUThreshold
			if t == 0 {
				t = 0.9 // the shed rules' default
			}
			r.warm = min(r.warm, t/2)
		}
	}
	return r
}

// run reports until ctx ends, and returns the service's totals.
func (r *reporter) run(ctx context.Context) slidegate.Totals {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLine := r.start
	r.watch()
	for {
		select {
		case <-ctx.Done():
			in, _ := r.g.Stats(slidegate.InboundResource)
			return in.Totals
		case now := <-tick.C:
			r.watch()
			if now.Sub(lastLine) < time.Second {
				continue
			}
			elapsed := now.Sub(lastLine).Seconds()
			lastLine = now
			fmt.Fprintln(r.out, r.line(now.Sub(r.start), elapsed))
		}
	}
}

// watch notes the most requests in flight under each adaptive rule, prints
// a line for each shed rule that started or stopped to shed, and one, once,
// when other work keeps the CPU busy.
func (r *reporter) watch() {
	at := stamp(time.Since(r.start))
	if c := r.cpu; c != nil && !r.saidOther {
		if own, all := c.Usage(), c.Cgroup(); all-own >= r.warm {
			r.saidOther = true
			fmt.Fprintf(r.out, "%s  other work keeps the CPU at %.0f%%; the shed rules read this process's %.0f%%\n", at, 100*all, 100*own)
		}
	}
	var keys []string
	now := map[string]string{}
	detail := map[string]string{} // said with a change, not part of the state
	for _, o := range r.g.Overload() {
		if o.Type == slidegate.AdaptiveRule {
			r.peak[o.Resource] = max(r.peak[o.Resource], o.InFlight)
			continue
		}
		k := "shed rule " + o.Rule + " on " + o.Resource
		now[k] = "not shedding"
		if o.Shedding {
			now[k] = "shedding"
		}
		if o.CPU >= 0 {
			detail[k] = fmt.Sprintf(" (CPU %.0f%%)", 100*o.CPU)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if was, ok := r.states[k]; ok && was != now[k] {
			fmt.Fprintf(r.out, "%s  %s: %s → %s%s\n", at, k, was, now[k], detail[k])
		}
		r.states[k] = now[k]
	}
}

// line is the line of the second that ends at d into the demo, elapsed
// seconds after the line before.
func (r *reporter) line(d time.Duration, elapsed float64) string {
	limits := map[string]int64{}
	for _, o := range r.g.Overload() {
		if o.Type == slidegate.AdaptiveRule {
			limits[o.Resource] = o.Limit
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-8s", stamp(d), phaseAt(d).name)
	for _, ep := range endpoints {
		s, _ := r.g.Stats(ep.resource)
		sec := routeSecond{name: strings.TrimPrefix(ep.path, "/api/"), d: delta(s.Totals, r.prev[ep.resource]), p99: s.P99, limit: -1}
		r.prev[ep.resource] = s.Totals
		if l, ok := limits[ep.resource]; ok {
			sec.limit, sec.peak = l, r.peak[ep.resource]
			r.peak[ep.resource] = 0
		}
		b.WriteString(sec.format(elapsed))
	}
	return strings.TrimRight(b.String(), " ")
}

// A routeSecond is what the demo's line says of an endpoint.
type routeSecond struct {
	name  string
	d     slidegate.Totals // the requests since the line before
	p99   time.Duration
	limit int64 // its adaptive limit; -1 for none
	peak  int64 // the most requests in flight under it since the line before
}

// format writes the endpoint's part of the line, its counts per second
// over elapsed seconds: the requests that succeeded, were blocked with
// 429 and with 503, and failed.
func (s routeSecond) format(elapsed float64) string {
	rate := func(n int64) float64 { return float64(n) / elapsed }
	tooMany, unavailable := blockedByStatus(s.d)
	out := fmt.Sprintf(" | %s %3.0f ok %3.0f 429s %3.0f 503s %2.0f failed p99 %-5v",
		s.name, rate(s.d.Succeeded), rate(tooMany), rate(unavailable), rate(s.d.Failed), s.p99.Round(time.Millisecond))
	if s.limit >= 0 {
		out += fmt.Sprintf(" limit %d, %d in flight", s.limit, s.peak)
	}
	return out
}

// blockedByStatus splits t's blocked requests by the status httpguard
// answers them with: 429 Too Many Requests (a limit the client reached)
// and 503 Service Unavailable (a breaker open, or the service overloaded).
func blockedByStatus(t slidegate.Totals) (tooMany, unavailable int64) {
	for reason, n := range t.BlockedBy {
		if n == 0 {
			continue
		}
		switch status, _ := httpguard.BlockedStatus(&slidegate.BlockError{Reason: flow.Reason(reason)}); status {
		case http.StatusTooManyRequests:
			tooMany += n
		default:
			unavailable += n
		}
	}
	return tooMany, unavailable
}

// delta returns the counts in t that were not in prev.
func delta(t, prev slidegate.Totals) slidegate.Totals {
	d := slidegate.Totals{Allowed: t.Allowed - prev.Allowed, Succeeded: t.Succeeded - prev.Succeeded, Failed: t.Failed - prev.Failed}
	for i := range d.BlockedBy {
		d.BlockedBy[i] = t.BlockedBy[i] - prev.BlockedBy[i]
	}
	return d
}

// stamp formats d as the demo's clock: "  12.3s".
func stamp(d time.Duration) string { return fmt.Sprintf("%6.1fs", d.Seconds()) }
