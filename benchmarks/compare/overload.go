package compare

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowsim"
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"
)

// An OverloadLimiter is one limiter of the overload comparison: how to build
// it for one run of flowsim.Simulate, and how it is driven.
type OverloadLimiter struct {
	Name string
	// Driven says how the limiter is driven, and why that way: it is
	// printed under the table.
	Driven string
	// RealTime marks a limiter that reads the real clock: its runs are
	// paced so that virtual time follows real time.
	RealTime bool
	New      flowsim.AdmitterFactory
}

// overloadOrigin is the virtual time the scenarios start at, so that no
// limiter sees time 0.
const overloadOrigin = int64(time.Hour)

// OverloadLimiters returns the limiters of the overload comparison: the
// reference that admits everything, slidegate's Shedder and Adaptive
// limiters, go-concurrency-limits' Gradient2 and AIMD limits, and go-zero's
// adaptive shedder (run in real time, see Driven).
func OverloadLimiters() []OverloadLimiter {
	return []OverloadLimiter{
		{Name: "none (admit all)", Driven: "refuses nothing: what the service does unprotected", New: func(func() float64) flowsim.Admitter { return admitAll{} }},
		{Name: "fixed limit W (reference)", Driven: "a concurrency limit of the service's 50 workers, known in advance and never moved (flow.Concurrency would do the same): no queue, so latency is the service time; the capacity halving is not followed",
			New: func(func() float64) flowsim.Admitter { return &fixedLimit{limit: 50} }},
		{Name: "slidegate Shedder", Driven: "flow.Shedder with its defaults, CPU = the service's busy share per 100 ms, smoothed with cpu.Sampler's default time constant (300 ms), threshold 0.9; virtual time (AcquireAt, DoneAt); a timed-out request is Cancelled (no completion); its trace is its bound (what it admits while it sheds)",
			New: newSlidegateShedder},
		{Name: "slidegate Adaptive gradient", Driven: "flow.Adaptive with its defaults (algorithm gradient); virtual time (AcquireAt, DoneAt(now, timedOut))",
			New: newSlidegateAdaptive("gradient")},
		{Name: "slidegate Adaptive AIMD", Driven: "flow.Adaptive with its defaults and algorithm aimd; virtual time",
			New: newSlidegateAdaptive("aimd")},
		{Name: "go-concurrency-limits Gradient2", Driven: "limit.NewDefaultGradient2Limit, admitting while in flight < EstimatedLimit; OnSample(start, rtt, in flight at admission, timedOut) per request on virtual time, without the library's DefaultLimiter (it reads the real clock and batches samples into windows)",
			New: newGCL(func() gcllimitLimit { return gcllimit.NewDefaultGradient2Limit("sim", nil, nil) })},
		{Name: "go-concurrency-limits AIMD", Driven: "limit.NewDefaultAIMDLimit, driven as Gradient2",
			New: newGCL(func() gcllimitLimit { return gcllimit.NewDefaultAIMDLimit("sim", nil) })},
		{Name: "go-zero AdaptiveShedder", RealTime: true, Driven: "load.NewAdaptiveShedder() with its defaults, in real time: it reads the real clock (timex) and the real CPU of the machine's cgroup (core/stat), which the simulated service does not load: it sheds only when other work on the machine is busy, so this row changes with the machine; Pass at the end of service, Fail at a timeout",
			New: newGoZeroShedder()},
		{Name: "go-zero AdaptiveShedder, CPU gate open", RealTime: true, Driven: "load.NewAdaptiveShedder(load.WithCpuThreshold(0)), in real time: with the CPU gate always open, what its Little's-law bound (max pass per bucket × min response time) does alone, still scaled down by its overload factor, (1 - real CPU) / (1 - threshold), at least 0.1, from the machine's real CPU; not how go-zero is configured",
			New: newGoZeroShedder(load.WithCpuThreshold(0))},
	}
}

type fixedLimit struct{ limit, inFlight int64 }

func (f *fixedLimit) Admit(int64) (func(int64, bool), bool) {
	if f.inFlight >= f.limit {
		return nil, false
	}
	f.inFlight++
	return func(int64, bool) { f.inFlight-- }, true
}

type admitAll struct{}

func (admitAll) Admit(int64) (func(int64, bool), bool) { return func(int64, bool) {}, true }

// slidegateShedder drives a flow.Shedder on virtual time. Permits are
// allocated per request: the simulation, not the shedder, is measured.
type slidegateShedder struct {
	s    *flow.Shedder
	last int64
	cpu  smoothedUtilization
}

func newSlidegateShedder(utilization func() float64) flowsim.Admitter {
	a := &slidegateShedder{cpu: smoothedUtilization{read: utilization, tau: float64(cpuSmoothing)}}
	s, err := flow.NewShedder(flow.ShedderSettings{CPU: a.cpu.value, CPUThreshold: 0.9, Clock: clock.NewManual(overloadOrigin)})
	if err != nil {
		panic(err) // constant settings
	}
	a.s = s
	return a
}

// cpuSmoothing is a cpu.Sampler's default time constant (WithSmoothing).
const cpuSmoothing = 300 * time.Millisecond

// smoothedUtilization turns the simulated service's busy share per
// flowsim.SlotLength into what a cpu.Sampler with its default smoothing
// reports: a moving average with a time constant of tau, taken once per
// slot.
type smoothedUtilization struct {
	read     func() float64
	tau      float64
	slot     int64
	smoothed float64
}

func (u *smoothedUtilization) advance(now int64) {
	slot := now / int64(flowsim.SlotLength)
	if slot == u.slot {
		return
	}
	if u.slot == 0 {
		u.smoothed = u.read()
	} else {
		alpha := 1 - math.Exp(-float64(slot-u.slot)*float64(flowsim.SlotLength)/u.tau)
		u.smoothed += alpha * (u.read() - u.smoothed)
	}
	u.slot = slot
}

func (u *smoothedUtilization) value() float64 { return u.smoothed }

func (a *slidegateShedder) Admit(now int64) (func(int64, bool), bool) {
	a.last = now
	a.cpu.advance(now)
	p := new(flow.Permit)
	if !a.s.AcquireAt(now, p, "").Allowed {
		return nil, false
	}
	return func(now int64, timedOut bool) {
		if timedOut {
			p.Done(flow.Ignored)
		} else {
			p.DoneAt(now, flow.Succeeded)
		}
	}, true
}

// Limit traces the shedder's bound at the last decision; an unknown bound
// (the first bucket) is traced as 0.
func (a *slidegateShedder) Limit() int64 {
	if b := flowstate.Shedder(a.s, a.last).Limit; b != math.MaxInt64 {
		return b
	}
	return 0
}

type slidegateAdaptive struct{ a *flow.Adaptive }

func newSlidegateAdaptive(alg string) flowsim.AdmitterFactory {
	return func(func() float64) flowsim.Admitter {
		a, err := flow.NewAdaptive(flow.AdaptiveSettings{Algorithm: alg, Clock: clock.NewManual(overloadOrigin)})
		if err != nil {
			panic(err) // constant settings
		}
		return slidegateAdaptive{a}
	}
}

func (s slidegateAdaptive) Admit(now int64) (func(int64, bool), bool) {
	p := new(flow.Permit)
	if !s.a.AcquireAt(now, p, "").Allowed {
		return nil, false
	}
	return func(now int64, timedOut bool) {
		if timedOut {
			p.DoneAt(now, flow.FailedOverloaded)
		} else {
			p.DoneAt(now, flow.Succeeded)
		}
	}, true
}

func (s slidegateAdaptive) Limit() int64 { return flowstate.Adaptive(s.a).Limit }

// gcllimitLimit is the part of go-concurrency-limits' core.Limit used here.
type gcllimitLimit interface {
	EstimatedLimit() int
	OnSample(startTime int64, rtt int64, inFlight int, didDrop bool)
}

// gcl admits while fewer than the limit's estimate are in flight and gives
// it one sample per request, as its DefaultLimiter does without the window.
type gcl struct {
	l        gcllimitLimit
	inFlight int
}

func newGCL(mk func() gcllimitLimit) flowsim.AdmitterFactory {
	return func(func() float64) flowsim.Admitter { return &gcl{l: mk()} }
}

func (g *gcl) Admit(now int64) (func(int64, bool), bool) {
	if g.inFlight >= g.l.EstimatedLimit() {
		return nil, false
	}
	g.inFlight++
	atAdmission := g.inFlight
	return func(end int64, timedOut bool) {
		g.inFlight--
		g.l.OnSample(now, end-now, atAdmission, timedOut)
	}, true
}

func (g *gcl) Limit() int64 { return int64(g.l.EstimatedLimit()) }

// quietGoZeroShedder keeps go-zero's shedder from logging every shed
// request (it formats and writes one line per drop) and its CPU statistics.
var quietGoZeroShedder = sync.OnceFunc(func() { logx.SetLevel(logx.SevereLevel) })

type goZero struct{ s load.Shedder }

func newGoZeroShedder(opts ...load.ShedderOption) flowsim.AdmitterFactory {
	return func(func() float64) flowsim.Admitter {
		quietGoZeroShedder()
		return goZero{load.NewAdaptiveShedder(opts...)}
	}
}

func (g goZero) Admit(int64) (func(int64, bool), bool) {
	p, err := g.s.Allow()
	if err != nil {
		return nil, false
	}
	return func(_ int64, timedOut bool) {
		if timedOut {
			p.Fail()
		} else {
			p.Pass()
		}
	}, true
}

// realTimePacer returns a flowsim pace function that sleeps until the real
// time since the first call catches up with the virtual time. It does not
// sleep for less than lag: a real-time run is as exact as the machine's
// timers, and falls behind when the machine is busy (the measured response
// times then include the delay).
func realTimePacer(lag time.Duration) func(now int64) {
	var start time.Time
	var origin int64
	return func(now int64) {
		if start.IsZero() {
			start, origin = time.Now(), now
		}
		if d := time.Duration(now-origin) - time.Since(start); d > lag {
			time.Sleep(d)
		}
	}
}

// Overload runs every limiter through every scenario against
// flowsim.DefaultService with one seed, and returns the results in
// limiter-major order. The virtual-time runs run one after another; the
// real-time runs all at once, in real time, so the whole takes as long as
// the longest scenario.
func Overload(limiters []OverloadLimiter, scenarios []flowsim.Scenario, seed uint64) ([]flowsim.OverloadResult, error) {
	out := make([]flowsim.OverloadResult, len(limiters)*len(scenarios))
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i, l := range limiters {
		for j, sc := range scenarios {
			k := i*len(scenarios) + j
			run := func() {
				opt := flowsim.SimOptions{Seed: seed, Origin: overloadOrigin}
				if l.RealTime {
					opt.Pace = realTimePacer(200 * time.Microsecond)
				}
				r, err := flowsim.Simulate(flowsim.DefaultService(), sc, l.New, opt)
				if err != nil {
					errs[k] = fmt.Errorf("%s, %s: %w", l.Name, sc.Name, err)
				}
				r.Limiter = l.Name
				out[k] = r
			}
			if l.RealTime {
				wg.Add(1)
				go func() { defer wg.Done(); run() }()
			} else {
				run()
			}
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// The goals for slidegate's limiters under overload.
const (
	GoalGoodput  = 0.95            // goodput, × C
	GoalP99      = 2.0             // p99 latency, × S
	GoalConverge = 2 * time.Second // from cold
	GoalRecover  = 5 * time.Second // to 90 % of the doubled capacity
	GoalTrend    = 1.1             // the limit's trend under sustained overload, at most
)

// MissedGoals returns the goals a result misses. Where the offered load is
// below the capacity, the goodput goal is 95 % of what was offered and
// nothing may be blocked beyond 1 %.
func MissedGoals(r flowsim.OverloadResult) []string {
	var missed []string
	if r.OfferedShare < 1 {
		if r.Goodput < GoalGoodput*r.OfferedShare {
			missed = append(missed, "goodput")
		}
		if r.BlockedShare > 0.01 {
			missed = append(missed, "blocked")
		}
	} else if r.Goodput < GoalGoodput {
		missed = append(missed, "goodput")
	}
	if !(r.P99 <= GoalP99) {
		missed = append(missed, "p99")
	}
	if r.Converge == flowsim.Never || r.Converge > GoalConverge {
		missed = append(missed, "converge")
	}
	if r.Recover == flowsim.Never || r.Recover > GoalRecover {
		missed = append(missed, "recover")
	}
	if r.LimitTrend > GoalTrend {
		missed = append(missed, "grows")
	}
	return missed
}

// WriteOverloadTable writes the results as one markdown table, with the
// goals as its first row and the goals each result misses in its last
// column, then how each limiter was driven.
func WriteOverloadTable(w io.Writer, limiters []OverloadLimiter, results []flowsim.OverloadResult) error {
	var b strings.Builder
	b.WriteString("| limiter | scenario | offered × C | goodput × C | p99 × S | blocked | converge | recover | limit trend | goals missed |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	fmt.Fprintf(&b, "| **goals (slidegate)** | | | ≥ %.2f | ≤ %.1f | | ≤ %v | ≤ %v | ≤ %.1f | |\n",
		GoalGoodput, GoalP99, GoalConverge, GoalRecover, GoalTrend)
	for _, r := range results {
		missed := strings.Join(MissedGoals(r), ", ")
		if missed == "" {
			missed = "none"
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.3f | %s | %.1f %% | %s | %s | %s | %s |\n",
			r.Limiter, r.Scenario, r.OfferedShare, r.Goodput, fmtNaN(r.P99), 100*r.BlockedShare,
			flowsim.FormatSettle(r.Converge), flowsim.FormatSettle(r.Recover), fmtNaN(r.LimitTrend), missed)
	}
	b.WriteString("\nHow each limiter was driven:\n\n")
	for _, l := range limiters {
		fmt.Fprintf(&b, "- %s: %s.\n", l.Name, l.Driven)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtNaN(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}
