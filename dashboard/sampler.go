package dashboard

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// A point is one sample of one resource: 64 bytes.
type point struct {
	at                       int64   // the clock's reading
	allowed, blocked, failed float64 // requests per second since the previous sample
	inFlight                 int64
	p50, p99                 time.Duration
	breaker                  breakerState
	// wouldBlock is the requests per second, since the previous sample,
	// that shadow rules would have blocked (among allowed). A float32, to
	// 7 significant digits, so that it fits beside breaker in what would
	// be padding, and a point stays 64 bytes.
	wouldBlock float32
}

// pointRates are the rates of a point: requests per second between two
// readings of a resource's totals.
type pointRates struct {
	allowed, blocked, failed, wouldBlock float64
}

// A breakerState is the worst state of a resource's breakers, ordered so
// that a larger one is worse.
type breakerState uint8

const (
	noBreaker breakerState = iota
	closedBreaker
	halfOpenBreaker
	openBreaker
)

func stateOf(s breaker.State) breakerState {
	switch s {
	case breaker.Open:
		return openBreaker
	case breaker.HalfOpen:
		return halfOpenBreaker
	default:
		return closedBreaker
	}
}

// String returns the state as the page names it, "" for none.
func (s breakerState) String() string {
	switch s {
	case closedBreaker:
		return "closed"
	case halfOpenBreaker:
		return "half-open"
	case openBreaker:
		return "open"
	}
	return ""
}

// A series is what the dashboard knows of one resource: its points, oldest
// first, in a ring of at most the history's length, and the guard's latest
// statistics of it.
type series struct {
	name    string
	ring    []point
	start   int // the oldest point's index, once the ring is full
	prev    slidegate.Totals
	stats   slidegate.ResourceStats
	breaker breakerState
	seen    uint64    // the observation that last found the resource
	fresh   bool      // the last sample added a point
	keys    *keysJSON // its top keys, if it has per-key rules (observeKeys)
}

// add appends p, dropping the oldest point if the series holds limit of them.
// The ring grows as points come, so that a short-lived resource does not
// cost a whole history.
func (s *series) add(p point, limit int) {
	if len(s.ring) < limit {
		if len(s.ring) == cap(s.ring) {
			grown := make([]point, len(s.ring), min(max(2*cap(s.ring), 16), limit))
			copy(grown, s.ring)
			s.ring = grown
		}
		s.ring = append(s.ring, p)
		return
	}
	s.ring[s.start] = p
	s.start = (s.start + 1) % len(s.ring)
}

// newest calls fn for each of the newest n points (all of them if there are
// fewer), oldest first.
func (s *series) newest(n int, fn func(point)) {
	for i := max(len(s.ring)-n, 0); i < len(s.ring); i++ {
		fn(s.ring[(s.start+i)%len(s.ring)])
	}
}

// lastPoint returns the newest point, if there is one.
func (s *series) lastPoint() (point, bool) {
	if len(s.ring) == 0 {
		return point{}, false
	}
	return s.ring[(s.start+len(s.ring)-1)%len(s.ring)], true
}

// update takes in the guard's statistics of the resource at time now, and
// if record is set adds a point with the rates since the previous sample,
// elapsed seconds ago.
func (s *series) update(now int64, st slidegate.ResourceStats, br breakerState, elapsed float64, record bool, limit int) {
	s.fresh = false
	if record {
		r := rates(s.prev, st.Totals, elapsed)
		s.add(point{
			at: now, allowed: r.allowed, blocked: r.blocked, failed: r.failed, wouldBlock: float32(r.wouldBlock),
			inFlight: st.InFlight, p50: st.P50, p99: st.P99, breaker: br,
		}, limit)
		s.fresh = true
	}
	s.prev = st.Totals
	s.stats = st
	s.breaker = br
}

// rates returns the requests allowed, blocked, failed and that shadow rules
// would have blocked, per second, between two readings of a resource's
// totals, elapsed seconds apart. Totals only grow while the guard keeps the
// resource; if one went down, the guard dropped the resource and made it
// again in between (slidegate.Totals), and the counts began again from
// zero.
func rates(prev, cur slidegate.Totals, elapsed float64) pointRates {
	da, db, df, ds := cur.Allowed-prev.Allowed, cur.Blocked()-prev.Blocked(), cur.Failed-prev.Failed, cur.Succeeded-prev.Succeeded
	dw := cur.WouldBlock() - prev.WouldBlock()
	if da < 0 || db < 0 || df < 0 || ds < 0 || dw < 0 || cur.RT < prev.RT {
		da, db, df, dw = cur.Allowed, cur.Blocked(), cur.Failed, cur.WouldBlock()
	}
	return pointRates{
		allowed: float64(da) / elapsed, blocked: float64(db) / elapsed, failed: float64(df) / elapsed,
		wouldBlock: float64(dw) / elapsed,
	}
}

// Sample reads the guard's clock once, reads the guard at that time and
// records a point for each of its resources, then sends it to the event
// streams. The sampler goroutine calls it every interval; call it yourself
// for tests (with a clock.Manual given to the guard) or on a schedule of
// your own (with WithInterval(0)). A Sample at the same
// clock reading as the previous one does nothing: it has no time to divide
// by.
//
// The sample's event is encoded once, here, and only if a stream is being
// served, or was a moment ago; every stream writes the same bytes.
func (d *Dashboard) Sample() {
	if d.g == nil {
		return // a zero Dashboard
	}
	d.sampling.Lock()
	defer d.sampling.Unlock()
	now := d.clock.Now()
	if now <= d.last {
		return
	}
	rulesChanged := d.observe(now, true)
	d.mu.Lock()
	streaming := d.streams > 0 || now < d.streamEnded+int64(resumeGrace)
	d.mu.Unlock()
	var ev *frame
	if streaming {
		ev = d.encodeEvent(rulesChanged)
	}
	d.publish(ev)
}

// observe reads the guard at time now, and with record set records a
// point for every resource, the rates covering the time since the previous
// observation. Resources the guard no longer keeps are dropped. It reports
// whether the rules in force changed since the previous observation.
// d.sampling is held.
//
// Every reading of the guard is at now (its ...At methods), so that one
// sample costs one clock reading, the caller's, and its statistics, its
// breakers and its time all describe the same instant.
func (d *Dashboard) observe(now int64, record bool) (rulesChanged bool) {
	resources := d.g.ResourcesAt(now)
	breakers := d.g.BreakersAt(now)
	d.overload = d.g.OverloadAt(now)
	d.retries = d.retriesNow()
	inbound, _ := d.g.StatsAt(now, slidegate.InboundResource)
	rules := d.g.Rules()
	if b, err := json.Marshal(rules); err == nil && !bytes.Equal(b, d.rulesJSON) {
		// The page names every rule (Rules.Named), as the breakers and
		// the overload rules name theirs, and keys them by resource and
		// name.
		d.rulesJSON, rulesChanged = b, true
		d.rules = rules.Named()
	}
	d.observeEvents()
	d.cluster = d.clusterNow()
	d.dropped = d.g.DroppedEvents()
	d.breakers = breakers

	worst := make(map[string]breakerState, len(breakers))
	for _, b := range breakers {
		if b.Shadow {
			continue // blocks nothing: the rules table shows its state, tagged
		}
		worst[b.Resource] = max(worst[b.Resource], stateOf(b.State))
	}
	elapsed := time.Duration(now - d.last).Seconds()
	if record {
		d.seq++
	}
	d.observations++
	obs := d.observations

	otherSeen := false
	for _, st := range resources {
		s := d.series[st.Resource]
		if s == nil {
			s = &series{name: st.Resource}
			if st.Resource == slidegate.OtherResource {
				// The guard keeps OtherResource always, but need not
				// list it (before it counts anything): its totals are
				// not reset while it is not listed.
				s.prev = d.otherPrev
			}
			d.series[st.Resource] = s
		}
		s.update(now, st, worst[st.Resource], elapsed, record, d.history)
		s.seen = obs
		otherSeen = otherSeen || st.Resource == slidegate.OtherResource
	}
	for name, s := range d.series {
		if s.seen != obs {
			delete(d.series, name)
		}
	}
	if !otherSeen {
		if st, ok := d.g.StatsAt(now, slidegate.OtherResource); ok {
			d.otherPrev = st.Totals
		}
	}
	d.observeKeys(d.rules)
	d.inbound.update(now, inbound, noBreaker, elapsed, record, d.history)
	d.last = now
	return rulesChanged
}

// sorted returns the series by name. d.sampling is held.
func (d *Dashboard) sorted() []*series {
	out := make([]*series, 0, len(d.series))
	for _, s := range d.series {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *series) int { return strings.Compare(a.name, b.name) })
	return out
}

// retriesNow reads the retry budgets. Each is read on its own clock
// (flow.RetryBudget.Stats), which need not be the guard's: a time on the
// guard's clock could name another interval of the budget's. The slice is
// new, never changed after, so a snapshot may encode it after the sampler
// has moved on; it is empty, not nil, without budgets, so that it is
// written [] and not null.
func (d *Dashboard) retriesNow() []retryJSON {
	out := make([]retryJSON, len(d.budgets))
	for i, nb := range d.budgets {
		st := flowstate.Retries(nb.b)
		out[i] = retryJSON{Budget: nb.name, Requests: st.Requests, Retries: st.Retries, Blocked: st.Blocked, NotRetried: st.NotRetried}
	}
	return out
}
