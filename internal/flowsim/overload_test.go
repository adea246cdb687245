package flowsim

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// admitAll is the reference admitter that refuses nothing.
type admitAll struct{}

func (admitAll) Admit(int64) (func(int64, bool), bool) { return func(int64, bool) {}, true }

// fixedLimit is the reference admitter with a fixed concurrency limit.
type fixedLimit struct {
	limit, inFlight int64
}

func (f *fixedLimit) Admit(int64) (func(int64, bool), bool) {
	if f.inFlight >= f.limit {
		return nil, false
	}
	f.inFlight++
	return func(int64, bool) { f.inFlight-- }, true
}

func (f *fixedLimit) Limit() int64 { return f.limit }

func newAdmitAll(func() float64) Admitter { return admitAll{} }

func newFixed(limit int64) AdmitterFactory {
	return func(func() float64) Admitter { return &fixedLimit{limit: limit} }
}

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	for _, sc := range OverloadScenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

func simulate(t *testing.T, svc Service, sc Scenario, f AdmitterFactory) OverloadResult {
	t.Helper()
	res, err := Simulate(svc, sc, f, SimOptions{Seed: 1})
	if err != nil {
		t.Fatalf("%s: %v", sc.Name, err)
	}
	return res
}

func TestAdmitAllCollapsesUnderOverload(t *testing.T) {
	for _, name := range []string{"cold start, 3x", "bursty, 3x average", "3x, capacity halves then doubles"} {
		res := simulate(t, DefaultService(), scenario(t, name), newAdmitAll)
		// The queue grows by 2 C each second, so after 0.25 s every request
		// waits longer than the timeout and the workers serve clients that
		// have gone.
		if res.Goodput > 0.05 || res.P99 < 9.99 || res.Blocked != 0 || res.Converge != Never {
			t.Errorf("%s: admit all: goodput %.3f (want < 0.05), p99 %.2f S (want the timeout, 10 S), blocked %d, converge %v",
				name, res.Goodput, res.P99, res.Blocked, res.Converge)
		}
	}
}

func TestFixedLimitOfTheWorkersKeepsGoodputAndLatency(t *testing.T) {
	svc := DefaultService()
	w := int64(svc.workers(svc.Capacity))
	res := simulate(t, svc, scenario(t, "cold start, 3x"), newFixed(w))
	// With at most W in flight nothing queues: every request takes S ± 20 %,
	// and a worker idles only until the next arrival (1/3C on average, 0.7 %
	// of S).
	if res.Goodput < 0.97 || res.Goodput > 1.0 || res.P99 > 1.2 || res.P99 < 1.15 {
		t.Errorf("fixed W: goodput %.3f (want 0.97..1), p99 %.3f S (want 1.15..1.2)", res.Goodput, res.P99)
	}
	if math.Abs(res.BlockedShare-2.0/3) > 0.02 || res.TimedOut != 0 {
		t.Errorf("fixed W: blocked %.3f (want 2/3), timed out %d", res.BlockedShare, res.TimedOut)
	}
	if res.Converge < 0 || res.Converge > ConvergeWindow {
		t.Errorf("fixed W: converge %v, want at most %v", res.Converge, ConvergeWindow)
	}
	if res.LimitTrend != 1 {
		t.Errorf("fixed W: limit trend %v, want 1", res.LimitTrend)
	}

	res = simulate(t, svc, scenario(t, "3x, capacity halves then doubles"), newFixed(w))
	// Halved, W in flight is twice the workers: the excess waits one service
	// time, so latencies double, but every worker stays busy.
	if res.Goodput < 0.97 || res.P99 < 1.9 || res.P99 > 2.5 {
		t.Errorf("fixed W, halving: goodput %.3f (want >= 0.97), p99 %.2f S (want about 2)", res.Goodput, res.P99)
	}
	if res.Recover < 0 || res.Recover > time.Second {
		t.Errorf("fixed W, halving: recover %v, want within 1 s", res.Recover)
	}
	if res.Converge < 0 || res.Converge > ConvergeWindow {
		t.Errorf("fixed W, halving: converge %v (judged before the halving), want at most %v", res.Converge, ConvergeWindow)
	}
}

func TestBelowCapacityNothingIsBlockedOrLate(t *testing.T) {
	svc := DefaultService()
	// A fixed limit of W would refuse when all W happen to be busy (Erlang's
	// loss formula: about 2 % at 0.8 load on 50 workers); at 2 W the excess
	// queues instead.
	for _, f := range []AdmitterFactory{newAdmitAll, newFixed(2 * int64(svc.workers(svc.Capacity)))} {
		res := simulate(t, svc, scenario(t, "below capacity, 0.8x"), f)
		if math.Abs(res.OfferedShare-0.8) > 0.03 || math.Abs(res.Goodput-res.OfferedShare) > 0.01 {
			t.Errorf("0.8x: offered %.3f (want 0.8), goodput %.3f (want all of it)", res.OfferedShare, res.Goodput)
		}
		if res.Blocked != 0 || res.TimedOut != 0 || res.Converge != 0 || res.P99 > 2 {
			t.Errorf("0.8x: blocked %d, timed out %d, converge %v, p99 %.2f S", res.Blocked, res.TimedOut, res.Converge, res.P99)
		}
	}
}

func TestBurstyArrivalsAlternateOnAndOff(t *testing.T) {
	svc := DefaultService()
	sc := scenario(t, "bursty, 3x average")
	var on, off int
	res, err := Simulate(svc, sc, func(func() float64) Admitter {
		return admitFunc(func(now int64) {
			if now%int64(200*time.Millisecond) < int64(100*time.Millisecond) {
				on++
			} else {
				off++
			}
		})
	}, SimOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if off != 0 || math.Abs(res.OfferedShare-3) > 0.1 {
		t.Errorf("bursty: %d arrivals in on phases, %d in off phases (want 0), offered %.2f × C (want 3)", on, off, res.OfferedShare)
	}
}

// admitFunc admits everything and calls f with the time of each arrival.
type admitFunc func(now int64)

func (f admitFunc) Admit(now int64) (func(int64, bool), bool) {
	f(now)
	return func(int64, bool) {}, true
}

// recorder admits every other request and records what the simulator told it.
type recorder struct {
	n        int
	admitted []int64
	ends     []int64
	late     []bool
	calls    []int
}

func (r *recorder) Admit(now int64) (func(int64, bool), bool) {
	r.n++
	if r.n%2 == 0 {
		return nil, false
	}
	i := len(r.admitted)
	r.admitted = append(r.admitted, now)
	r.ends = append(r.ends, -1)
	r.late = append(r.late, false)
	r.calls = append(r.calls, 0)
	return func(now int64, overloaded bool) {
		r.calls[i]++
		r.ends[i], r.late[i] = now, overloaded
	}, true
}

// referenceEnds is an independent model of the service without jitter: FIFO
// over w servers, each request starting when it arrives or when the first
// server frees, whichever is later; its client's answer comes at the end of
// its service or at its timeout, whichever is first. A timed-out request
// keeps its server until served.
// With dropExpired, a request whose client has gone by the time a server
// would start it takes no server.
func referenceEnds(arrivals []int64, w int, service, timeout int64, dropExpired bool) (ends []int64, late []bool) {
	free := make(minHeap, w)
	for _, a := range arrivals {
		start := max(a, free[0])
		if dropExpired && start > a+timeout {
			ends, late = append(ends, a+timeout), append(late, true)
			continue
		}
		heap.Pop(&free)
		heap.Push(&free, start+service)
		end := start + service
		if end > a+timeout {
			ends, late = append(ends, a+timeout), append(late, true)
		} else {
			ends, late = append(ends, end), append(late, false)
		}
	}
	return ends, late
}

type minHeap []int64

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func TestServiceMatchesAReferenceFIFOModel(t *testing.T) {
	// Bursts at 2.5x (every other request blocked) that time most of their
	// requests out, and bursts at 1.5x with pauses too short to serve the
	// backlog, so that the next burst waits behind the requests of clients
	// that have gone (and would not if they were skipped).
	for _, c := range []struct {
		seed     uint64
		multiple float64
		off      time.Duration
		drop     bool
	}{
		{1, 5, 700 * time.Millisecond, false}, {2, 5, 700 * time.Millisecond, false},
		{3, 3, 100 * time.Millisecond, false}, {4, 3, 100 * time.Millisecond, false},
		{5, 5, 700 * time.Millisecond, true}, {6, 3, 100 * time.Millisecond, true},
	} {
		seed := c.seed
		svc := Service{Capacity: 100, ServiceTime: 40 * time.Millisecond, Timeout: 150 * time.Millisecond, DropExpired: c.drop}
		sc := Scenario{Name: "reference", Duration: 5 * time.Second, Rate: OnOff(c.multiple, 300*time.Millisecond, c.off)}
		r := &recorder{}
		res, err := Simulate(svc, sc, func(func() float64) Admitter { return r }, SimOptions{Seed: seed, Origin: 7})
		if err != nil {
			t.Fatal(err)
		}
		arr := make([]int64, len(r.admitted))
		for i, a := range r.admitted {
			arr[i] = a - 7
		}
		ends, late := referenceEnds(arr, svc.workers(svc.Capacity), int64(svc.ServiceTime), int64(svc.Timeout), svc.DropExpired)
		var ended int64
		for i := range arr {
			if ends[i] >= int64(sc.Duration) {
				if r.calls[i] != 0 {
					t.Fatalf("seed %d: request %d ended at %d, after the run, in the reference", seed, i, ends[i])
				}
				continue
			}
			ended++
			if r.calls[i] != 1 || r.ends[i]-7 != ends[i] || r.late[i] != late[i] {
				t.Fatalf("seed %d: request %d arriving at %d: done called %d times, at %d late %v; reference %d late %v",
					seed, i, arr[i], r.calls[i], r.ends[i]-7, r.late[i], ends[i], late[i])
			}
		}
		if res.Good+res.TimedOut != ended || res.Offered != int64(r.n) || res.Blocked != int64(r.n/2) {
			t.Errorf("seed %d: good %d + timed out %d, want %d ended; offered %d blocked %d, want %d and %d",
				seed, res.Good, res.TimedOut, ended, res.Offered, res.Blocked, r.n, r.n/2)
		}
		if res.TimedOut == 0 || res.Good == 0 {
			t.Errorf("seed %d: the scenario should time some requests out and serve others: good %d, timed out %d", seed, res.Good, res.TimedOut)
		}
	}
}

func TestUtilizationIsTheBusyShareOfTheLastSlot(t *testing.T) {
	svc := DefaultService()
	for _, c := range []struct {
		name     string
		lo, hi   float64
		scenario string
	}{
		{"overloaded", 0.99, 1, "cold start, 3x"},
		{"0.8x", 0.7, 0.9, "below capacity, 0.8x"},
	} {
		var sum float64
		var n int
		_, err := Simulate(svc, scenario(t, c.scenario), func(u func() float64) Admitter {
			return admitFunc(func(now int64) {
				if now >= int64(time.Second) {
					sum += u()
					n++
				}
			})
		}, SimOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if mean := sum / float64(n); mean < c.lo || mean > c.hi {
			t.Errorf("%s: mean utilization %.3f, want in [%v, %v]", c.name, mean, c.lo, c.hi)
		}
	}
}

func TestSimulateIsDeterministicForASeed(t *testing.T) {
	sc := scenario(t, "3x, capacity halves then doubles")
	run := func(seed uint64) string {
		res, err := Simulate(DefaultService(), sc, newFixed(40), SimOptions{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v", res)
	}
	if a, b := run(5), run(5); a != b {
		t.Errorf("two runs with seed 5 differ:\n%s\n%s", a, b)
	}
	if a, b := run(5), run(6); a == b {
		t.Errorf("seeds 5 and 6 gave the same run: %s", a)
	}
}

func TestLimitTrendSeesAGrowingLimit(t *testing.T) {
	sc := scenario(t, "cold start, 3x")
	res := simulate(t, DefaultService(), sc, func(func() float64) Admitter { return &growing{fixedLimit{limit: 10}} })
	// The limit grows by one per admitted request: 10 + the admissions.
	if !(res.LimitTrend > 1.1) {
		t.Errorf("growing limit: trend %.3f, want > 1.1", res.LimitTrend)
	}
	if res := simulate(t, DefaultService(), sc, newAdmitAll); !math.IsNaN(res.LimitTrend) {
		t.Errorf("admit all has no limit, trend %v, want NaN", res.LimitTrend)
	}
}

type growing struct{ fixedLimit }

func (g *growing) Admit(now int64) (func(int64, bool), bool) {
	done, ok := g.fixedLimit.Admit(now)
	if ok {
		g.limit++
	}
	return done, ok
}

func TestSimulateRejectsBadInputNamingTheField(t *testing.T) {
	good := DefaultService()
	sc := scenario(t, "cold start, 3x")
	for _, c := range []struct {
		svc  Service
		sc   Scenario
		want string
	}{
		{Service{Capacity: 0, ServiceTime: time.Second, Timeout: time.Second}, sc, "capacity 0"},
		{Service{Capacity: math.NaN(), ServiceTime: time.Second, Timeout: time.Second}, sc, "capacity NaN"},
		{Service{Capacity: 10, ServiceTime: -1, Timeout: time.Second}, sc, "service time -1ns"},
		{Service{Capacity: 10, ServiceTime: time.Second, Jitter: 1, Timeout: time.Second}, sc, "jitter 1"},
		{Service{Capacity: 10, ServiceTime: time.Second}, sc, "timeout 0s"},
		{Service{Capacity: 1e9, ServiceTime: time.Second, Timeout: time.Second}, sc, "more than"},
		{good, Scenario{Name: "x", Duration: 0, Rate: Steady(1)}, "duration 0s"},
		{good, Scenario{Name: "x", Duration: time.Second}, "no rate"},
		{good, Scenario{Name: "x", Duration: time.Second, Rate: Steady(1), MeasureFrom: time.Second}, "measured from 1s"},
		{good, Scenario{Name: "x", Duration: time.Second, Rate: Steady(1), Changes: []CapacityChange{{At: 0, Factor: -1}}}, "factor -1"},
		{good, Scenario{Name: "x", Duration: time.Second, Rate: Steady(1), Changes: []CapacityChange{{At: 2, Factor: 1}, {At: 1, Factor: 1}}}, "change 1 at 1ns"},
		{good, Scenario{Name: "x", Duration: time.Second, Rate: Steady(-1)}, "is -1"},
		{good, Scenario{Name: "x", Duration: time.Second, Rate: func(time.Duration) (float64, time.Duration) { return 1, 0 }}, "holds until 0s"},
		{good, Scenario{Name: "x", Duration: time.Hour, Rate: Steady(1e5)}, "expects 360000000000 arrivals"},
	} {
		_, err := Simulate(c.svc, c.sc, newAdmitAll, SimOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Simulate(%+v, %q): error %v, want one with %q", c.svc, c.sc.Name, err, c.want)
		}
	}
}

func TestWriteOverloadTable(t *testing.T) {
	res := simulate(t, DefaultService(), scenario(t, "3x, capacity halves then doubles"), newFixed(50))
	res.Limiter = "fixed 50"
	var b strings.Builder
	if err := WriteOverloadTable(&b, []OverloadResult{res}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "| fixed 50 | 3x, capacity halves then doubles | 3.6") {
		t.Errorf("table:\n%s", b.String())
	}
}

// BenchmarkSimulate30s measures one 30 s scenario at C = 1000/s, S = 50 ms.
func BenchmarkSimulate30s(b *testing.B) {
	sc := OverloadScenarios()[1]
	for b.Loop() {
		if _, err := Simulate(DefaultService(), sc, newFixed(50), SimOptions{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
