package flowsim

import (
	"fmt"
	"math"
	"time"
)

// An Admitter is a limiter under test in an overload simulation: it decides
// whether a request enters the service.
//
// Admit is asked at virtual time now (nanoseconds) whether a request enters.
// If ok, the simulator calls done exactly once, when the request ends for
// its client: at the time its service ended, with overloaded false, or at
// its client's timeout, with overloaded true. A request that timed out may
// still hold a worker after done (see Service). The simulator calls Admit
// and done from one goroutine, in time order.
//
// An Admitter that also has a method Limit() int64 (an adaptive limit) has
// it read every 100 ms of virtual time, for the limit's trend (see
// OverloadResult.LimitTrend).
type Admitter interface {
	Admit(now int64) (done func(now int64, overloaded bool), ok bool)
}

// A Limited is an Admitter whose limit the simulator traces.
type Limited interface {
	Limit() int64
}

// A Service is the system an overload simulation protects: Workers =
// Capacity × ServiceTime workers (rounded, at least one) serve admitted
// requests from one FIFO queue. A request's service time is ServiceTime
// times a factor drawn uniformly from [1-Jitter, 1+Jitter]; its latency is
// its wait in the queue plus its service time.
//
// A client waits at most Timeout for its request. The service does not learn
// that a client gave up (there is no deadline propagation), so a request
// that timed out keeps its place in the queue and is served, wasting a
// worker, unless DropExpired is set: then a worker skips queued requests
// whose client has gone. A request already in service when its client gives
// up is always served to the end. This waste is what makes goodput collapse
// when nothing refuses the excess.
//
// A change of capacity (Scenario.Changes) changes the number of workers: new
// workers start on the queue at once; removed workers finish the request
// they serve and then stop.
type Service struct {
	Capacity    float64       // requests per second the service completes when busy; > 0
	ServiceTime time.Duration // mean service time S; > 0
	Jitter      float64       // relative spread of the service time, in [0, 1)
	Timeout     time.Duration // client timeout; > 0
	DropExpired bool          // skip queued requests whose client has gone
}

// DefaultService returns the service the standard scenarios run against:
// 1000 requests per second, a service time of 50 ms ± 20 % (so 50 workers)
// and a client timeout of ten service times.
func DefaultService() Service {
	return Service{Capacity: 1000, ServiceTime: 50 * time.Millisecond, Jitter: 0.2, Timeout: 500 * time.Millisecond}
}

// workers returns the number of workers that serve capacity requests per second.
func (s Service) workers(capacity float64) int {
	return max(1, int(math.Round(capacity*s.ServiceTime.Seconds())))
}

func (s Service) validate() error {
	switch {
	case !(s.Capacity > 0) || math.IsInf(s.Capacity, 0):
		return fmt.Errorf("flowsim: service capacity %v: must be a positive number of requests per second", s.Capacity)
	case s.ServiceTime <= 0:
		return fmt.Errorf("flowsim: service time %v: must be positive", s.ServiceTime)
	case !(s.Jitter >= 0 && s.Jitter < 1):
		return fmt.Errorf("flowsim: service jitter %v: must be in [0, 1)", s.Jitter)
	case s.Timeout <= 0:
		return fmt.Errorf("flowsim: service timeout %v: must be positive", s.Timeout)
	case s.workers(s.Capacity) > 1<<20:
		return fmt.Errorf("flowsim: service capacity %v and service time %v: more than %d workers", s.Capacity, s.ServiceTime, 1<<20)
	}
	return nil
}

// A Rate gives the arrival rate at time t since the start of a scenario, as
// a multiple of the service's initial capacity, and the time until which
// that rate holds (> t). Arrivals are Poisson at that rate.
type Rate func(t time.Duration) (multiple float64, until time.Duration)

// Steady returns a constant Rate of multiple × the initial capacity.
func Steady(multiple float64) Rate {
	return func(time.Duration) (float64, time.Duration) { return multiple, math.MaxInt64 }
}

// OnOff returns a Rate that alternates multiple × the initial capacity for
// on and no arrivals for off, starting with on.
func OnOff(multiple float64, on, off time.Duration) Rate {
	return func(t time.Duration) (float64, time.Duration) {
		period := on + off
		start := t - t%period
		if t-start < on {
			return multiple, start + on
		}
		return 0, start + period
	}
}

// A CapacityChange sets the service's capacity to Factor × its initial
// capacity at time At since the start of a scenario.
type CapacityChange struct {
	At     time.Duration
	Factor float64
}

// A Scenario is one named overload run.
//
// The measured part [MeasureFrom, Duration) is where goodput, p99 latency
// and the blocked share are measured; the first part is left out so that
// they describe the limiter's steady behaviour, not its start (which
// OverloadResult.Converge measures). Sustained is the part of the run under
// sustained overload over which a traced limit must not grow (see
// OverloadResult.LimitTrend); zero means none.
type Scenario struct {
	Name        string
	Duration    time.Duration
	Rate        Rate
	Changes     []CapacityChange // in time order
	MeasureFrom time.Duration
	Sustained   [2]time.Duration
}

// OverloadScenarios returns the standard overload scenarios, each against
// DefaultService:
//
//   - cold start, 3x: Poisson arrivals at 3 × capacity for 10 s, from a cold
//     limiter;
//   - 3x, capacity halves then doubles: 3 × the initial capacity for 30 s;
//     capacity halves at 10 s and doubles back at 20 s;
//   - bursty, 3x average: 6 × capacity for 100 ms, nothing for 100 ms, for
//     10 s. The pauses last two service times: to keep every worker busy
//     through one, the queue at its start must hold 2 × C × 100 ms, so no
//     admitter serves more than about 75 % of C at a p99 of 2 S, nor 95 %
//     below a p99 of about 2.8 S;
//   - short bursts, 3x average: the same with bursts and pauses of 20 ms,
//     less than half a service time, which a queue of 1.4 × the workers
//     bridges;
//   - below capacity, 0.8x: 0.8 × capacity for 10 s, where a limiter should
//     refuse nothing.
//
// Each is measured from 2 s on.
func OverloadScenarios() []Scenario {
	return []Scenario{
		{Name: "cold start, 3x", Duration: 10 * time.Second, Rate: Steady(3),
			MeasureFrom: 2 * time.Second, Sustained: [2]time.Duration{2 * time.Second, 10 * time.Second}},
		{Name: "3x, capacity halves then doubles", Duration: 30 * time.Second, Rate: Steady(3),
			Changes:     []CapacityChange{{10 * time.Second, 0.5}, {20 * time.Second, 1}},
			MeasureFrom: 2 * time.Second, Sustained: [2]time.Duration{10 * time.Second, 20 * time.Second}},
		{Name: "bursty, 3x average", Duration: 10 * time.Second, Rate: OnOff(6, 100*time.Millisecond, 100*time.Millisecond),
			MeasureFrom: 2 * time.Second, Sustained: [2]time.Duration{2 * time.Second, 10 * time.Second}},
		{Name: "short bursts, 3x average", Duration: 10 * time.Second, Rate: OnOff(6, 20*time.Millisecond, 20*time.Millisecond),
			MeasureFrom: 2 * time.Second, Sustained: [2]time.Duration{2 * time.Second, 10 * time.Second}},
		{Name: "below capacity, 0.8x", Duration: 10 * time.Second, Rate: Steady(0.8),
			MeasureFrom: 2 * time.Second},
	}
}

func (sc Scenario) validate() error {
	if sc.Duration <= 0 || sc.Duration > 24*time.Hour {
		return fmt.Errorf("flowsim: scenario %q: duration %v: must be in (0, 24h]", sc.Name, sc.Duration)
	}
	if sc.Rate == nil {
		return fmt.Errorf("flowsim: scenario %q: no rate", sc.Name)
	}
	if sc.MeasureFrom < 0 || sc.MeasureFrom >= sc.Duration {
		return fmt.Errorf("flowsim: scenario %q: measured from %v: must be in [0, %v)", sc.Name, sc.MeasureFrom, sc.Duration)
	}
	var last time.Duration
	for i, c := range sc.Changes {
		if c.At < last || c.At > sc.Duration {
			return fmt.Errorf("flowsim: scenario %q: change %d at %v: must be in time order within the run", sc.Name, i, c.At)
		}
		if !(c.Factor > 0) || math.IsInf(c.Factor, 0) {
			return fmt.Errorf("flowsim: scenario %q: change %d factor %v: must be positive", sc.Name, i, c.Factor)
		}
		last = c.At
	}
	return nil
}

// capacityAt returns the capacity factor in force at t.
func (sc Scenario) capacityAt(t time.Duration) float64 {
	f := 1.0
	for _, c := range sc.Changes {
		if c.At > t {
			break
		}
		f = c.Factor
	}
	return f
}
