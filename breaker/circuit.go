package breaker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/notify"
	"github.com/slidegate/slidegate/internal/timegrid"
	"github.com/slidegate/slidegate/internal/windowhook"
	"github.com/slidegate/slidegate/window"
)

// A Circuit is a circuit breaker with states, as Sentinel's and gobreaker's.
//
// Closed, it allows requests and counts their outcomes over a sliding window
// ([Stats]). It opens when a failure (for [SlowRatio], a slow request)
// leaves the window meeting its [Strategy], with the minimum volume.
//
// Open, it blocks requests with [ErrBlocked] until the open timeout has
// passed ([WithOpenTimeout], which can double it each time probing fails). The first request at or after it turns the circuit half-open and
// becomes a probe.
//
// Half-open, it lets at most n probes be in flight at once ([WithProbes]).
// It blocks other requests with an error that wraps [ErrBlocked]. Only
// probes decide. One
// failure opens the circuit again, as does a probe unfinished after the
// probe timeout. n successes close it, with an empty window. When a
// half-open spell ends, its probes still running are abandoned: their
// results are ignored. The next spell has n places of its own.
//
// Every state change starts a new generation. A request's outcome counts
// only in the generation that allowed it. So a result that arrives after the
// circuit moved on is ignored: a request allowed while closed that ends
// while half-open, or a probe that ends after another one failed. Outcomes
// that [WithOutcomeOf] takes as [Ignored] count as nothing. An ignored probe
// gives its place back.
//
// State changes happen when requests observe their cause. An open circuit
// whose timeout has passed reads Open until the next request arrives. A
// probe that hangs is declared failed by the next request, or by its own
// late result. Listeners ([OnStateChange]) run on a goroutine of their own,
// only while there are changes to tell.
//
// A Circuit is safe for concurrent use. Allowing and settling a request
// allocate nothing, and take no lock unless the state changes. A closed
// Circuit reads the clock only to settle a request, and, for SlowRatio, to
// allow one. The zero Circuit is not usable; make one with [NewCircuit].
type Circuit struct {
	policy
	// th is what the circuit judges by: its strategy's threshold, minimum
	// volume, timeouts and probes, one immutable value (see thresholds).
	// The value is an allocation of its own, not a field: one that a
	// guard's reload replaces is freed, so the circuit takes no more
	// memory after a reload than before.
	th       atomic.Pointer[thresholds]
	clock    clock.Clock
	interval time.Duration
	buckets  int32
	timed    bool   // a closed circuit needs requests' start times (SlowRatio)
	shared   bool   // it reads its resource's counter (see shared.go)
	uncached bool   // its own window reads every bucket (see uncached)
	opens    uint32 // consecutive times probing failed, for the backoff; under mu

	// state is the state word: generation<<2 | State. Outcomes carry the
	// word that allowed them and count only while it is unchanged.
	state atomic.Uint64
	// stats is what the circuit counted since it last closed, replaced by
	// an empty one when it closes again. Only requests allowed while closed
	// write to it, and they check the state word after loading it: a writer
	// of an earlier closed generation finds the state word changed (the
	// circuit cannot close without opening first), or, if the circuit
	// moves on between its check and its write, writes to the window it
	// loaded, which the new generation no longer reads.
	stats atomic.Pointer[closedWindow]
	// away is what the circuit keeps from when it opens to when it closes
	// again (see openState): nil while closed, so that a closed circuit,
	// the common one, keeps no probe places and no count of blocks.
	away atomic.Pointer[openState]

	mu      sync.Mutex // held to change state, and to take or free a probe place
	tickets uint64     // the sequence of probe tickets, never reset: a ticket is never issued twice
	notify  *notify.Queue[Transition]
	hook    func(*Circuit, Transition) // onTransition's
}

// An openState is what a Circuit keeps while it is open or half-open: made
// when it opens from Closed, kept while it opens again from HalfOpen, and
// dropped when it closes. A half-open spell whose number of probes was
// changed (see thresholds) gets a new one, with the same count of blocks.
// Readers load it after the state word; one that finds it nil, or finds it
// no longer the circuit's, has seen the circuit close or move on
// meanwhile, and reads the state word again or does nothing.
type openState struct {
	until     atomic.Int64    // while open: when a probe may be allowed
	blocked   *window.Counter // the requests blocked since the circuit opened
	successes int             // probes that succeeded in this half-open spell; under mu
	probes    []probe
}

// A closedWindow is what a Circuit counts from one closing to the next: the
// window of outcomes, and the run of failures since the latest success.
// The run is kept apart from the window because it has an order, which
// buckets do not; the window bounds it (see statsAt). A closed circuit
// blocks nothing: the requests it blocks are counted in its openState.
type closedWindow struct {
	// t is the window of outcomes: the circuit's own, or its resource's
	// counter, read with from, cell and x (see shared.go).
	t    *window.Counter
	run  atomic.Int64 // failures counted since the latest success
	from atomic.Int64
	cell [2]atomic.Int64 // by Outcome, Success and Failure
	x    taken           // what a shared window takes from its resource's counts
}

// The events a closed Circuit counts (slow requests only for SlowRatio), and
// those an open one does.
var (
	circuitEvents = window.WithEvents(window.Succeeded, window.Failed)
	timedEvents   = window.WithEvents(window.Succeeded, window.Failed, window.Slow)
	blockedEvents = window.WithEvents(window.Blocked)
)

// checkWindow returns the error newClosedWindow returns for buckets and
// interval, or nil, without making the window: a shared circuit's window is
// its resource's counter.
func checkWindow(buckets int, interval time.Duration) error {
	if err := checkCounter(buckets, interval); err != nil {
		return fmt.Errorf("%w: window: %w", errInvalidConfig, err)
	}
	return nil
}

var checkCounter = windowhook.CheckCounter.(func(int, time.Duration) error)

func newClosedWindow(buckets int, interval time.Duration, c clock.Clock, timed, uncached bool) (*closedWindow, error) {
	events := circuitEvents
	if timed {
		events = timedEvents
	}
	cache := window.CachedSums()
	if uncached {
		cache = nil
	}
	t, err := window.NewCounter(buckets, interval, window.WithClock(c), events, cache)
	if err != nil {
		return nil, fmt.Errorf("%w: window: %w", errInvalidConfig, err)
	}
	return &closedWindow{t: t}, nil
}

// newOpenState returns the openState of a circuit that opens now: no
// probe place taken, no block counted. Its window is the closed window's
// shape, which NewCircuit checked.
func (c *Circuit) newOpenState(th *thresholds) *openState {
	t, err := window.NewCounter(int(c.buckets), c.interval, window.WithClock(c.clock), blockedEvents)
	if err != nil {
		panic("breaker: a window that NewCircuit made cannot be made again: " + err.Error())
	}
	return &openState{blocked: t, probes: make([]probe, th.probes)}
}

// statsAt returns the window's counts at time now: of its own window, or,
// shared, of its resource's counter (see shared.go).
//
// The run of failures in the window is the smaller of the run counted and
// the window's failures, when outcomes are counted in the order of their
// times (as one caller's are; concurrent callers' may cross by the moment
// between reading the clock and counting). If the latest success is still in
// the window, so is every failure counted after it: the run is at most the
// window's failures, and is the answer. If the success has left the window,
// so have the failures before it: every failure in the window is part of the
// run, and their number is the answer.
func (w *closedWindow) statsAt(now int64, shared bool) Stats {
	var s window.Sums
	if shared {
		s = w.sharedSumsAt(now)
	} else {
		s = w.t.SumsAt(now)
	}
	succ, fail := s[window.Succeeded], s[window.Failed]
	return Stats{
		Requests:            succ + fail,
		Successes:           succ,
		Failures:            fail,
		Slow:                s[window.Slow],
		ConsecutiveFailures: min(w.run.Load(), fail),
	}
}

// A probe is one place for a half-open circuit's probe: the holder's ticket
// (0 when free) and its start time. Places are taken and freed only under the
// Circuit's mutex, and every transition to HalfOpen frees them all (a
// closing drops them with their openState), so a place never changes hands
// behind its holder's back. Requests read them without
// the lock to find a free place or a timed-out probe, and check again under
// it before acting.
type probe struct {
	ticket atomic.Uint64
	start  atomic.Int64
}

// A ticket is a sequence number, never repeated, above the index of the
// place it was issued for.
const ticketShift = 10 // maxProbes = 1 << ticketShift

// slotOf returns the index of the place a ticket was issued for.
func slotOf(ticket uint64) int { return int(ticket & (maxProbes - 1)) }

// NewCircuit returns a Circuit that opens on strategy s. Its defaults are
// a window of 10 s in 10 buckets ([WithWindow]) and a minimum volume of 10
// ([WithMinRequests]; none for [ConsecutiveFailures] and [TripWhen]). It
// stays open 5 s, without backoff ([WithOpenTimeout]), and sends 1 probe at
// a time ([WithProbes]). A bad strategy or option is an error wrapping
// [github.com/slidegate/slidegate.ErrInvalidConfig].
func NewCircuit(s Strategy, opts ...Option) (*Circuit, error) {
	st, th, err := circuitSettings(s, opts)
	if err != nil {
		return nil, err
	}
	// The window first: it checks the buckets, which the circuit keeps in
	// fewer bits. A circuit that shares is given its window (see share).
	var w *closedWindow
	if st.shared {
		err = checkWindow(st.buckets, st.interval)
	} else {
		w, err = newClosedWindow(st.buckets, st.interval, st.clock, s.kind == slowRatio, st.uncached)
	}
	switch {
	case err != nil:
		return nil, err
	case st.shared:
		if err := canShare(s, st); err != nil {
			return nil, err
		}
	}
	c := &Circuit{
		policy:   policy{st.outcomeOf},
		clock:    st.clock,
		interval: st.interval,
		buckets:  int32(st.buckets),
		timed:    s.kind == slowRatio,
		shared:   st.shared,
		uncached: st.uncached,
	}
	c.th.Store(&th)
	if w != nil {
		c.stats.Store(w)
	}
	c.hook = st.onTransition
	if f := st.onStateChange; f != nil {
		c.notify = notify.New(func(t Transition) {
			t.Dropped = c.notify.Dropped()
			f(t)
		}, queueSize)
	}
	return c, nil
}

// maxProbes bounds WithProbes: a half-open circuit scans its probe places on
// every request.
const maxProbes = 1 << ticketShift

// Allow reports whether a request may proceed now: always while closed, only
// as a probe while half-open, never while open ([ErrBlocked]). Settle the
// [Promise] with the request's outcome.
func (c *Circuit) Allow() (Promise, error) {
	st := c.state.Load()
	switch {
	case State(st&3) != Closed:
		return c.allowNotClosed(timegrid.Clamp(c.clock.Now()))
	case c.timed:
		return Promise{rec: (*circuitRecorder)(c), token: st, start: timegrid.Clamp(c.clock.Now())}, nil
	}
	return Promise{rec: (*circuitRecorder)(c), token: st}, nil
}

// AllowAt is Allow at time now, in nanoseconds on the breaker's clock.
func (c *Circuit) AllowAt(now int64) (Promise, error) {
	now = timegrid.Clamp(now)
	if st := c.state.Load(); State(st&3) == Closed {
		return Promise{rec: (*circuitRecorder)(c), token: st, start: now}, nil
	}
	return c.allowNotClosed(now)
}

// allowNotClosed is AllowAt's path for an open or half-open circuit (or one
// that has closed since AllowAt looked).
func (c *Circuit) allowNotClosed(now int64) (Promise, error) {
	for {
		st := c.state.Load()
		if State(st&3) == Closed {
			return Promise{rec: (*circuitRecorder)(c), token: st, start: now}, nil
		}
		// Loaded after the state word: nil, the circuit has closed since.
		a := c.away.Load()
		if a == nil {
			continue
		}
		if State(st&3) == Open {
			if now < a.until.Load() {
				a.blocked.AddAt(now, window.Blocked, 1)
				return Promise{}, ErrBlocked
			}
			c.transition(st, HalfOpen, now, openTimeoutPassed, Stats{}, c.th.Load())
			continue
		}
		if c.expired(a, st, now) {
			continue
		}
		if p, ok := c.claim(a, st, now); ok {
			return p, nil
		}
		if c.state.Load() != st {
			continue
		}
		a.blocked.AddAt(now, window.Blocked, 1)
		return Promise{}, errProbesBusy
	}
}

// claim takes a free probe place of a, loaded after half-open state word st,
// if there is one and the circuit is still in that state (so a is still
// its openState).
func (c *Circuit) claim(a *openState, st uint64, now int64) (Promise, bool) {
	for i := range a.probes {
		if a.probes[i].ticket.Load() != 0 {
			continue
		}
		c.mu.Lock()
		if c.state.Load() != st {
			c.mu.Unlock()
			return Promise{}, false
		}
		p := &a.probes[i]
		if p.ticket.Load() != 0 {
			c.mu.Unlock()
			continue
		}
		c.tickets++
		t := c.tickets<<ticketShift | uint64(i)
		p.start.Store(now)
		p.ticket.Store(t)
		c.mu.Unlock()
		return Promise{rec: (*circuitRecorder)(c), token: probeBit | t, start: now}, true
	}
	return Promise{}, false
}

// expired opens the circuit if a probe of a, loaded after half-open state
// word st, has been in flight for the probe timeout, and reports whether it
// did.
func (c *Circuit) expired(a *openState, st uint64, now int64) bool {
	th := c.th.Load()
	timeout := th.probeTimeout
	for i := range a.probes {
		p := &a.probes[i]
		if t := p.ticket.Load(); t == 0 || now-p.start.Load() < timeout {
			continue
		}
		c.mu.Lock()
		opened := false
		// Under the lock the place and the state are stable: check again.
		if c.state.Load() == st && p.ticket.Load() != 0 && now-p.start.Load() >= timeout {
			opened = c.change(st, Open, now, probeTimedOut, Stats{}, th)
		}
		c.mu.Unlock()
		if opened {
			return true
		}
	}
	return false
}

// A Circuit's Promise has as its token the state word that allowed the
// request, or, for a probe, probeBit and the probe's ticket. A state word
// (generation<<2 | State) and a ticket never reach bit 63.
const probeBit = 1 << 63

// record settles a request allowed with Promise p.
func (c *Circuit) record(p Promise, now int64, o Outcome) {
	now = timegrid.Clamp(now)
	if p.token&probeBit != 0 {
		c.settleProbe(p.token&^probeBit, p.start, now, o)
		return
	}
	gen := p.token
	w := c.stats.Load() // before the state word: see stats
	if o == Ignored || c.shared || c.state.Load() != gen {
		return // a shared circuit counts with its resource: see settleShared
	}
	var th *thresholds
	slow := false
	if c.timed {
		th = c.th.Load()
		slow = th.strategy.slow(now - p.start)
	}
	if o == Success {
		w.t.AddAt(now, window.Succeeded, 1)
		// Most successes follow successes: read the run, which stays in
		// every core's cache, before writing it.
		if w.run.Load() != 0 {
			w.run.Store(0)
		}
	} else {
		w.t.AddAt(now, window.Failed, 1)
		w.run.Add(1)
	}
	if slow {
		w.t.AddAt(now, window.Slow, 1)
	}
	if slow || (o == Failure && !c.timed) {
		if th == nil {
			th = c.th.Load()
		}
		if n := w.statsAt(now, false); th.strategy.meets(n, th.minRequests) {
			c.transition(gen, Open, now, tripped, n, th)
		}
	}
}

// settleProbe settles the probe of ticket, allowed at start: a failure (or
// a timeout, or for SlowRatio a slow probe) opens the circuit, and the last
// success needed closes it. A probe whose place was freed meanwhile
// (settled already, or its half-open spell over) decides nothing.
//
// The place still holding the ticket, with the circuit half-open, means
// the probe's spell goes on: every change to HalfOpen frees every place,
// and a ticket is never issued twice.
func (c *Circuit) settleProbe(ticket uint64, start, now int64, o Outcome) {
	why := probeFailed
	th := c.th.Load()
	switch rt := now - start; {
	case rt >= th.probeTimeout: // even an ignored result: the probe hung
		o, why = Failure, probeTimedOut
	case o == Ignored:
	case th.strategy.slow(rt):
		o = Failure
	case c.timed:
		o = Success // SlowRatio judges time only
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state.Load()
	a := c.away.Load()
	if a == nil || State(st&3) != HalfOpen { // closed since: the places went with it
		return
	}
	// A spell of fewer places than the probe's (see thresholds) is not its.
	slot := slotOf(ticket)
	if slot >= len(a.probes) || a.probes[slot].ticket.Load() != ticket {
		return
	}
	place := &a.probes[slot]
	place.ticket.Store(0)
	switch o {
	case Failure:
		c.change(st, Open, now, why, Stats{}, th)
	case Success:
		if a.successes++; a.successes >= len(a.probes) {
			c.change(st, Closed, now, probesSucceeded, Stats{}, th)
		}
	}
}

// transition moves the circuit from state word from to state to, unless the
// state word has changed meanwhile, and reports whether it did. th are the
// thresholds the caller judged by: the transition takes its open timeout
// and probes from the same set, not from one a reload gave since.
func (c *Circuit) transition(from uint64, to State, now int64, why cause, w Stats, th *thresholds) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.change(from, to, now, why, w, th)
}

// change is transition with the mutex held.
func (c *Circuit) change(from uint64, to State, now int64, why cause, w Stats, th *thresholds) bool {
	if c.state.Load() != from {
		return false
	}
	next := (from>>2+1)<<2 | uint64(to)
	tr := Transition{From: State(from & 3), To: to, At: now, Generation: next >> 2, ProbeTimedOut: why == probeTimedOut}
	switch to {
	case Open:
		a := c.away.Load()
		if tr.From == HalfOpen {
			c.opens++
		} else {
			c.opens = 0
			a = c.newOpenState(th)
		}
		tr.OpenFor = th.openTimeoutAfter(c.opens)
		// |now| ≤ 2^60, so adding at most 2^62 cannot overflow; 2^62 ns
		// (146 years) is forever.
		a.until.Store(now + min(int64(tr.OpenFor), 1<<62))
		c.away.Store(a) // before the state word: see openState
		if why == tripped {
			tr.Stats = w
		}
	case HalfOpen:
		a := c.away.Load()
		if n := int(th.probes); len(a.probes) != n {
			// The number of probes changed while open: this spell has the
			// new number of places, none taken, and counts blocks on.
			a = &openState{blocked: a.blocked, probes: make([]probe, n)}
			c.away.Store(a) // before the state word: see openState
			break
		}
		for i := range a.probes {
			a.probes[i].ticket.Store(0)
		}
		a.successes = 0
	case Closed:
		c.opens = 0
		if c.shared {
			c.restart(now)
			break
		}
		w, err := newClosedWindow(int(c.buckets), c.interval, c.clock, c.timed, c.uncached)
		if err != nil {
			panic("breaker: a window that NewCircuit made cannot be made again: " + err.Error())
		}
		c.stats.Store(w)
	}
	c.state.Store(next)
	if to == Closed {
		c.away.Store(nil) // after the state word: see openState
	}
	if c.hook != nil {
		c.hook(c, tr)
	}
	if c.notify != nil {
		c.notify.Push(tr)
	}
	return true
}

// openTimeoutAfter returns the open timeout after probing failed n times in
// a row: the open timeout doubled n times, at most the backoff maximum.
func (th *thresholds) openTimeoutAfter(n uint32) time.Duration {
	d := th.openTimeout
	for ; n > 0 && d < th.maxOpen; n-- {
		d *= 2
		if d <= 0 || d > th.maxOpen { // past the maximum, or overflowed
			return th.maxOpen
		}
	}
	return d
}

// Stats returns the circuit's state and window counts now.
func (c *Circuit) Stats() Stats { return c.StatsAt(c.clock.Now()) }

// StatsAt returns the circuit's state and window counts at time now. The
// window counts requests since the circuit last closed, over at most the
// window's interval.
func (c *Circuit) StatsAt(now int64) Stats {
	now = timegrid.Clamp(now)
	w := c.stats.Load()
	st := c.state.Load()
	var s Stats
	if w != nil { // nil: a shared circuit not given its counter yet
		s = w.statsAt(now, c.shared)
	}
	s.State, s.Generation = State(st&3), st>>2
	a := c.away.Load()
	if s.State == Closed || a == nil { // nil: closed since the state word was read
		return s
	}
	s.Blocked = a.blocked.SumAt(now, window.Blocked)
	switch s.State {
	case Open:
		s.BlockRatio = 1
		s.RetryAfter = time.Duration(max(0, a.until.Load()-now))
	case HalfOpen:
		for i := range a.probes {
			if a.probes[i].ticket.Load() != 0 {
				s.ProbesInFlight++
			}
		}
		s.BlockRatio = float64(s.ProbesInFlight) / float64(len(a.probes))
	}
	return s
}

// retryAfterAt returns the rest of the open timeout at time now while the
// circuit is open, and 0 otherwise: the guard's Retry-After, read without
// the window (see internal/breakerhook).
func (c *Circuit) retryAfterAt(now int64) time.Duration {
	if State(c.state.Load()&3) != Open {
		return 0
	}
	a := c.away.Load() // after the state word: see openState
	if a == nil {
		return 0
	}
	return time.Duration(max(0, a.until.Load()-timegrid.Clamp(now)))
}
