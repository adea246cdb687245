package flowsim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SlotLength is the resolution of an overload simulation's measurements:
// goodput, latencies and a traced limit are kept per slot of this length,
// and Utilization is the busy share over the last whole slot.
const SlotLength = 100 * time.Millisecond

// maxArrivals bounds the work of one simulation, whatever the scenario
// asks: a scenario expecting more than half of it is blocked before it
// runs, and a run is stopped when it sees more. maxPieces bounds the
// constant pieces of a rate walked to find the expected number.
const (
	maxArrivals = 1 << 24
	maxPieces   = 1 << 22
)

// SimOptions are the settings of one overload simulation that are not the
// service or the scenario.
type SimOptions struct {
	// Seed seeds the arrivals and the service times; a run is a function of
	// its seed and its admitter's decisions. The i-th arrival has the same
	// service time whatever was admitted before it, so that limiters are
	// compared on the same requests.
	Seed uint64
	// Origin is added to every time passed to the admitter (virtual time 0
	// of the scenario is Origin), for limiters that misbehave at time 0.
	Origin int64
	// Pace, if set, is called with each event's virtual time (Origin
	// included) before the event is handled: a driver that must run in real
	// time (a limiter that reads the real clock) sleeps there until the real
	// time catches up.
	Pace func(now int64)
}

// An AdmitterFactory builds the admitter for one run. utilization reports
// the share of the service's workers that were busy over the last whole
// SlotLength of virtual time, in [0, 1] (0 before the first slot ends): a
// CPU-gated shedder reads it as its CPU usage. Workers that finish a
// request after a capacity cut count as busy, and the share is capped at 1.
type AdmitterFactory func(utilization func() float64) Admitter

const (
	evComplete = iota // ordered before timeouts and arrivals at one time: a worker frees first
	evTimeout
	evCapacity
)

type event struct {
	at   int64
	kind int
	seq  uint64
	arg  int // request index, or capacity change index
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type request struct {
	arrive   int64
	service  int64
	done     func(int64, bool)
	ended    bool // its client has its answer (served or timed out)
	timedOut bool
}

// slot holds what one SlotLength of virtual time measured.
type slot struct {
	offered, blocked, good, timedOut int64
	latencies                        []int64 // client-seen latency of each request that ended in the slot
	capacity                         float64 // requests the service could complete in the slot
	limit                            float64 // traced limit at the slot's start; NaN if none
}

type sim struct {
	svc   Service
	sc    Scenario
	opt   SimOptions
	adm   Admitter
	limit Limited

	events eventHeap
	seq    uint64
	reqs   []request
	queue  []int // FIFO of request indices; head at queueHead
	qHead  int

	workers, busy int
	slots         []slot
	// Busy-time accounting for Utilization: busyNs is the busy worker-time
	// since the start of the open slot, lastT the time it was brought up to.
	busyNs      float64
	lastT       int64
	nextSlot    int64 // virtual time of the next slot boundary
	utilization float64
}

// Simulate runs scenario sc against service svc, with the admitter that
// newAdmitter builds, on virtual time, and returns what it measured. It is
// deterministic for opt.Seed (unless opt.Pace or the admitter read real
// time). It returns an error naming the field for an invalid service or
// scenario, or a scenario whose rate expects more than 2^23 arrivals.
func Simulate(svc Service, sc Scenario, newAdmitter AdmitterFactory, opt SimOptions) (OverloadResult, error) {
	if err := svc.validate(); err != nil {
		return OverloadResult{}, err
	}
	if err := sc.validate(); err != nil {
		return OverloadResult{}, err
	}
	if err := svc.checkArrivals(sc); err != nil {
		return OverloadResult{}, err
	}
	s := &sim{svc: svc, sc: sc, opt: opt}
	s.workers = svc.workers(svc.Capacity)
	n := int((sc.Duration + SlotLength - 1) / SlotLength)
	s.slots = make([]slot, n)
	for i := range s.slots {
		s.slots[i].capacity = s.capacityIn(time.Duration(i)*SlotLength, min(time.Duration(i+1)*SlotLength, sc.Duration))
		s.slots[i].limit = math.NaN()
	}
	s.nextSlot = int64(SlotLength)
	s.adm = newAdmitter(func() float64 { return s.utilization })
	s.limit, _ = s.adm.(Limited)
	s.sampleLimit(0)
	for i, c := range sc.Changes {
		s.push(event{at: int64(c.At), kind: evCapacity, arg: i})
	}

	arrivals := rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15))
	services := rand.New(rand.NewPCG(opt.Seed^0x5851f42d4c957f2d, opt.Seed+1))
	end := int64(sc.Duration)
	next, err := s.nextArrival(arrivals, 0)
	if err != nil {
		return OverloadResult{}, err
	}
	count := 0
	for {
		// The next event is the earliest of the heap's and the next arrival;
		// at one time, heap events (completions first) go before arrivals.
		var t int64
		arrival := len(s.events) == 0 || next < s.events[0].at
		if arrival {
			t = next
		} else {
			t = s.events[0].at
		}
		if t >= end {
			break
		}
		s.advance(t)
		if opt.Pace != nil {
			opt.Pace(opt.Origin + t)
		}
		if !arrival {
			e := heap.Pop(&s.events).(event)
			s.handle(e)
			continue
		}
		if count++; count > maxArrivals {
			return OverloadResult{}, fmt.Errorf("flowsim: scenario %q: more than %d arrivals: rate too high for one simulation", sc.Name, maxArrivals)
		}
		s.arrive(t, s.drawService(services))
		if next, err = s.nextArrival(arrivals, t); err != nil {
			return OverloadResult{}, err
		}
	}
	s.advance(end)
	return s.result(), nil
}

// checkArrivals refuses a scenario whose rate is malformed or expects more
// arrivals than one simulation may take.
func (svc Service) checkArrivals(sc Scenario) error {
	var expected float64
	t, pieces := time.Duration(0), 0
	for ; t < sc.Duration && pieces < maxPieces; pieces++ {
		m, until := sc.Rate(t)
		if until <= t {
			return fmt.Errorf("flowsim: scenario %q: rate at %v holds until %v: must be later", sc.Name, t, until)
		}
		if !(m >= 0) || math.IsInf(m, 0) {
			return fmt.Errorf("flowsim: scenario %q: rate at %v is %v: must be a finite multiple >= 0", sc.Name, t, m)
		}
		until = min(until, sc.Duration)
		expected += m * svc.Capacity * (until - t).Seconds()
		t = until
	}
	if t < sc.Duration {
		return fmt.Errorf("flowsim: scenario %q: rate changes more than %d times", sc.Name, maxPieces)
	}
	if expected > maxArrivals/2 {
		return fmt.Errorf("flowsim: scenario %q: expects %.0f arrivals: more than %d for one simulation", sc.Name, expected, maxArrivals/2)
	}
	return nil
}

// nextArrival returns the time of the first Poisson arrival after t under a
// piecewise-constant rate. An exponential gap that crosses the end of a
// constant piece is redrawn from the piece's end: the process is memoryless,
// so this is exact.
func (s *sim) nextArrival(rng *rand.Rand, t int64) (int64, error) {
	for t < int64(s.sc.Duration) {
		m, until := s.sc.Rate(time.Duration(t))
		if int64(until) <= t {
			return 0, fmt.Errorf("flowsim: scenario %q: rate at %v holds until %v: must be later", s.sc.Name, time.Duration(t), until)
		}
		if !(m >= 0) || math.IsInf(m, 0) {
			return 0, fmt.Errorf("flowsim: scenario %q: rate at %v is %v: must be a finite multiple >= 0", s.sc.Name, time.Duration(t), m)
		}
		if m == 0 {
			t = int64(until)
			continue
		}
		gap := rng.ExpFloat64() / (m * s.svc.Capacity) * 1e9
		if float64(t)+gap < float64(until) {
			return t + max(int64(gap), 1), nil
		}
		t = int64(until)
	}
	return math.MaxInt64, nil
}

func (s *sim) drawService(rng *rand.Rand) int64 {
	f := 1 + s.svc.Jitter*(2*rng.Float64()-1)
	return max(int64(float64(s.svc.ServiceTime)*f), 1)
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

// advance brings the busy-time accounting and the slot boundaries up to t.
func (s *sim) advance(t int64) {
	for s.nextSlot <= t {
		s.busyNs += float64(s.busy) * float64(s.nextSlot-s.lastT)
		s.utilization = min(s.busyNs/(float64(s.workers)*float64(SlotLength)), 1)
		s.busyNs, s.lastT = 0, s.nextSlot
		s.sampleLimit(s.nextSlot)
		s.nextSlot += int64(SlotLength)
	}
	s.busyNs += float64(s.busy) * float64(t-s.lastT)
	s.lastT = t
}

func (s *sim) sampleLimit(t int64) {
	if i := int(t / int64(SlotLength)); s.limit != nil && i < len(s.slots) {
		s.slots[i].limit = float64(s.limit.Limit())
	}
}

func (s *sim) slotAt(t int64) *slot {
	return &s.slots[min(int(t/int64(SlotLength)), len(s.slots)-1)]
}

func (s *sim) arrive(t, service int64) {
	sl := s.slotAt(t)
	sl.offered++
	done, ok := s.adm.Admit(s.opt.Origin + t)
	if !ok {
		sl.blocked++
		return
	}
	s.reqs = append(s.reqs, request{arrive: t, service: service, done: done})
	i := len(s.reqs) - 1
	s.push(event{at: t + int64(s.svc.Timeout), kind: evTimeout, arg: i})
	s.queue = append(s.queue, i)
	s.dispatch(t)
}

// dispatch starts queued requests on free workers.
func (s *sim) dispatch(t int64) {
	for s.busy < s.workers && s.qHead < len(s.queue) {
		i := s.queue[s.qHead]
		s.qHead++
		if s.svc.DropExpired && s.reqs[i].timedOut {
			continue
		}
		s.busy++
		s.push(event{at: t + s.reqs[i].service, kind: evComplete, arg: i})
	}
	// Reclaim the consumed head of the queue once it is most of the slice.
	if s.qHead > 1024 && s.qHead*2 > len(s.queue) {
		s.queue = append(s.queue[:0], s.queue[s.qHead:]...)
		s.qHead = 0
	}
}

func (s *sim) handle(e event) {
	switch e.kind {
	case evComplete:
		s.busy--
		r := &s.reqs[e.arg]
		if !r.ended {
			r.ended = true
			sl := s.slotAt(e.at)
			sl.good++
			sl.latencies = append(sl.latencies, e.at-r.arrive)
			r.done(s.opt.Origin+e.at, false)
			r.done = nil
		}
		s.dispatch(e.at)
	case evTimeout:
		r := &s.reqs[e.arg]
		if !r.ended {
			r.ended, r.timedOut = true, true
			sl := s.slotAt(e.at)
			sl.timedOut++
			sl.latencies = append(sl.latencies, int64(s.svc.Timeout))
			r.done(s.opt.Origin+e.at, true)
			r.done = nil
		}
	case evCapacity:
		s.workers = s.svc.workers(s.svc.Capacity * s.sc.Changes[e.arg].Factor)
		s.dispatch(e.at)
	}
}

// capacityIn returns the requests the service can complete in [a, b).
func (s *sim) capacityIn(a, b time.Duration) float64 {
	var sum float64
	for t := a; t < b; {
		end := b
		for _, c := range s.sc.Changes {
			if c.At > t && c.At < end {
				end = c.At
			}
		}
		sum += s.sc.capacityAt(t) * s.svc.Capacity * (end - t).Seconds()
		t = end
	}
	return sum
}
