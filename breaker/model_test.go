package breaker

// A randomized differential test of Circuit against refCircuit, an independent
// reference model written from the specification alone (not from circuit.go,
// strategy.go or window.Counter). Both are driven through the same random
// operation sequences on a manual clock and compared after every operation:
// state, generation, errors, statistics, and for TripWhen every call of the
// condition with the counts it was given.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// ---------------------------------------------------------------------------
// Reference model

type refStrategyKind uint8

const (
	refErrorRatio refStrategyKind = iota
	refErrorCount
	refSlowRatio
	refConsecutive
	refTripWhen
	refKinds
)

// refConditions are the TripWhen conditions the random configurations choose
// from, each a function of the counts alone.
var refConditions = []struct {
	name string
	f    func(Stats) bool
}{
	{"more than 2 in a row", func(c Stats) bool { return c.ConsecutiveFailures > 2 }},
	{"at least 3 requests, 60% failing", func(c Stats) bool { return c.Requests >= 3 && c.Failures*5 >= c.Requests*3 }},
	{"no more successes than failures, 2 failures", func(c Stats) bool { return c.Failures >= 2 && c.Successes <= c.Failures }},
	{"any failure", func(Stats) bool { return true }},
}

// refConfig is one configuration, given both to the model and (as options) to
// the Circuit.
type refConfig struct {
	kind      refStrategyKind
	threshold float64 // ErrorRatio, SlowRatio
	count     int64   // ErrorCount, ConsecutiveFailures
	maxRT     int64   // SlowRatio
	condition int     // TripWhen: an index into refConditions

	minRequests int64 // -1: option not given (default 10; 0 for ConsecutiveFailures and TripWhen)
	window      int64 // W
	buckets     int64 // B

	openTimeout int64 // T; 0: option not given (default 5 s)
	backoff     int64 // X; 0: option not given
	probes      int   // N; 0: option not given (default 1, P = T)
	probeTO     int64 // P as given to WithProbes (0 means T)
}

func (c refConfig) String() string {
	var s string
	switch c.kind {
	case refErrorRatio:
		s = fmt.Sprintf("ErrorRatio(%v)", c.threshold)
	case refErrorCount:
		s = fmt.Sprintf("ErrorCount(%d)", c.count)
	case refSlowRatio:
		s = fmt.Sprintf("SlowRatio(%v, %v)", time.Duration(c.maxRT), c.threshold)
	case refConsecutive:
		s = fmt.Sprintf("ConsecutiveFailures(%d)", c.count)
	case refTripWhen:
		s = fmt.Sprintf("TripWhen(%q)", refConditions[c.condition].name)
	}
	s += fmt.Sprintf(" WithWindow(%d, %v)", c.buckets, time.Duration(c.window))
	if c.minRequests >= 0 {
		s += fmt.Sprintf(" WithMinRequests(%d)", c.minRequests)
	}
	if c.openTimeout > 0 || c.backoff > 0 {
		s += fmt.Sprintf(" WithOpenTimeout(%v, %v)", time.Duration(c.openTimeout), time.Duration(c.backoff))
	}
	if c.probes > 0 {
		s += fmt.Sprintf(" WithProbes(%d, %v)", c.probes, time.Duration(c.probeTO))
	}
	return s
}

// strategy returns the configuration's Strategy. A TripWhen condition
// appends the counts of each call to *calls.
func (c refConfig) strategy(calls *[]Stats) Strategy {
	switch c.kind {
	case refErrorRatio:
		return ErrorRatio(c.threshold)
	case refErrorCount:
		return ErrorCount(c.count)
	case refConsecutive:
		return ConsecutiveFailures(c.count)
	case refTripWhen:
		cond := refConditions[c.condition]
		return TripWhen(func(n Stats) bool { *calls = append(*calls, n); return cond.f(n) })
	default:
		return SlowRatio(time.Duration(c.maxRT), c.threshold)
	}
}

func (c refConfig) options(clk clock.Clock) []Option {
	opts := []Option{WithClock(clk), WithWindow(int(c.buckets), time.Duration(c.window))}
	if c.minRequests >= 0 {
		opts = append(opts, WithMinRequests(c.minRequests))
	}
	if c.openTimeout > 0 || c.backoff > 0 {
		d := time.Duration(c.openTimeout)
		if d == 0 {
			d = 5 * time.Second // the default
		}
		opts = append(opts, WithOpenTimeout(d, time.Duration(c.backoff)))
	}
	if c.probes > 0 {
		opts = append(opts, WithProbes(c.probes, time.Duration(c.probeTO)))
	}
	return opts
}

// Effective parameters, defaults applied.
func (c refConfig) effM() int64 {
	switch {
	case c.minRequests >= 0:
		return c.minRequests
	case c.kind == refConsecutive || c.kind == refTripWhen:
		return 0
	}
	return 10
}

func (c refConfig) effT() int64 {
	if c.openTimeout == 0 {
		return int64(5 * time.Second)
	}
	return c.openTimeout
}

func (c refConfig) effX() int64 {
	if c.backoff == 0 {
		return c.effT()
	}
	return c.backoff
}

func (c refConfig) effN() int {
	if c.probes == 0 {
		return 1
	}
	return c.probes
}

func (c refConfig) effP() int64 {
	if c.probes == 0 || c.probeTO == 0 {
		return c.effT()
	}
	return c.probeTO
}

type refKind uint8

const (
	refSuccess refKind = iota
	refFailure
	refSlow
	refBlocked
)

type refRecord struct {
	at   int64
	kind refKind
}

// refPromise is the model's view of one allowed (or blocked) request.
type refPromise struct {
	zero    bool // blocked: the zero Promise
	gen     uint64
	start   int64
	probe   bool
	settled bool // probes only
}

type refCircuit struct {
	cfg refConfig
	w   int64 // bucket width

	state     State
	gen       uint64
	openUntil int64
	failedK   int // consecutive failed probings
	successes int // probe successes in this half-open generation

	records  []refRecord   // in the order they were counted
	inFlight []*refPromise // probes in flight, this half-open generation
	calls    []Stats       // the TripWhen condition's calls
}

func newRefCircuit(cfg refConfig) *refCircuit {
	return &refCircuit{cfg: cfg, w: cfg.window / cfg.buckets}
}

func (m *refCircuit) bucket(x int64) int64 { return x / m.w }

// refTotals are the window's totals; run is the number of failures after
// the window's last success (all its failures if it has none).
type refTotals struct{ succ, fail, slow, rej, run int64 }

func (m *refCircuit) totals(now int64) refTotals {
	var t refTotals
	bn := m.bucket(now)
	for _, r := range m.records {
		b := m.bucket(r.at)
		if bn-m.cfg.buckets < b && b <= bn {
			switch r.kind {
			case refSuccess:
				t.succ++
				t.run = 0
			case refFailure:
				t.fail++
				t.run++
			case refSlow:
				t.slow++
			case refBlocked:
				t.rej++
			}
		}
	}
	return t
}

func (t refTotals) counts() Stats {
	return Stats{Requests: t.succ + t.fail, Successes: t.succ, Failures: t.fail, Slow: t.slow, ConsecutiveFailures: t.run}
}

func (m *refCircuit) add(now int64, k refKind) {
	// Time only moves forward, so records out of the window for good can go.
	bn := m.bucket(now)
	keep := m.records[:0]
	for _, r := range m.records {
		if m.bucket(r.at) > bn-m.cfg.buckets {
			keep = append(keep, r)
		}
	}
	m.records = append(keep, refRecord{now, k})
}

func (m *refCircuit) openTimeoutFor(k int) int64 {
	d, x := m.cfg.effT(), m.cfg.effX()
	for i := 0; i < k && d < x; i++ {
		if d > x/2 {
			d = x
		} else {
			d *= 2
		}
	}
	if d > x {
		d = x
	}
	return d
}

func (m *refCircuit) toOpen(now int64) {
	m.state = Open
	m.gen++
	m.openUntil = now + m.openTimeoutFor(m.failedK)
	m.inFlight = nil
}

func (m *refCircuit) toHalfOpen() {
	m.state = HalfOpen
	m.gen++
	m.successes = 0
	m.inFlight = nil
}

func (m *refCircuit) toClosed() {
	m.state = Closed
	m.gen++
	m.records = m.records[:0]
	m.failedK = 0
	m.inFlight = nil
}

func (m *refCircuit) allow(now int64) (*refPromise, error) {
	if m.state == Closed {
		return &refPromise{gen: m.gen, start: now}, nil
	}
	if m.state == Open {
		if now < m.openUntil {
			m.add(now, refBlocked)
			return &refPromise{zero: true}, ErrBlocked
		}
		m.toHalfOpen()
	}
	// HalfOpen
	for _, p := range m.inFlight {
		if now-p.start >= m.cfg.effP() {
			m.failedK++
			m.toOpen(now)
			// Continue as Open: openUntil > now, so block.
			m.add(now, refBlocked)
			return &refPromise{zero: true}, ErrBlocked
		}
	}
	if len(m.inFlight) < m.cfg.effN() {
		p := &refPromise{gen: m.gen, start: now, probe: true}
		m.inFlight = append(m.inFlight, p)
		return p, nil
	}
	m.add(now, refBlocked)
	return &refPromise{zero: true}, errProbesBusy
}

func (m *refCircuit) record(p *refPromise, now int64, o Outcome) {
	if p.zero {
		return
	}
	if p.probe {
		if m.gen != p.gen || p.settled {
			return
		}
		p.settled = true
		// A probe past its timeout has failed, whatever its result says,
		// Ignored included: it hung.
		if rt := now - p.start; rt >= m.cfg.effP() {
			o = Failure
		} else if o != Ignored {
			if m.cfg.kind == refSlowRatio {
				if rt > m.cfg.maxRT {
					o = Failure
				} else {
					o = Success
				}
			}
		}
		for i, q := range m.inFlight {
			if q == p {
				m.inFlight = append(m.inFlight[:i:i], m.inFlight[i+1:]...)
				break
			}
		}
		switch o {
		case Failure:
			m.failedK++
			m.toOpen(now)
		case Success:
			m.successes++
			if m.successes >= m.cfg.effN() {
				m.toClosed()
			}
		}
		return
	}
	if m.gen != p.gen || o == Ignored {
		return
	}
	if o == Success {
		m.add(now, refSuccess)
	} else {
		m.add(now, refFailure)
	}
	slow := m.cfg.kind == refSlowRatio && now-p.start > m.cfg.maxRT
	if slow {
		m.add(now, refSlow)
	}
	if slow || (o == Failure && m.cfg.kind != refSlowRatio) {
		t := m.totals(now)
		n := t.succ + t.fail
		if n >= 1 && n >= m.cfg.effM() {
			var trip bool
			switch m.cfg.kind {
			case refErrorRatio:
				trip = float64(t.fail)/float64(n) >= m.cfg.threshold
			case refErrorCount:
				trip = t.fail >= m.cfg.count
			case refSlowRatio:
				trip = float64(t.slow)/float64(n) >= m.cfg.threshold
			case refConsecutive:
				trip = t.run >= m.cfg.count
			case refTripWhen:
				m.calls = append(m.calls, t.counts())
				trip = refConditions[m.cfg.condition].f(t.counts())
			}
			if trip {
				m.failedK = 0
				m.toOpen(now)
			}
		}
	}
}

func (m *refCircuit) stats(now int64) Stats {
	t := m.totals(now)
	s := t.counts()
	s.State, s.Generation, s.Blocked = m.state, m.gen, t.rej
	switch m.state {
	case Open:
		s.BlockRatio = 1
		if m.openUntil > now {
			s.RetryAfter = time.Duration(m.openUntil - now)
		}
	case HalfOpen:
		s.ProbesInFlight = len(m.inFlight)
		s.BlockRatio = float64(len(m.inFlight)) / float64(m.cfg.effN())
	}
	return s
}

// ---------------------------------------------------------------------------
// Operations

type refOpKind uint8

const (
	opAllow refOpKind = iota
	opSettle
	opAdvance
)

type refOp struct {
	kind    refOpKind
	id      int     // opAllow: the id of the promise it makes
	target  int     // opSettle: the id of the promise it settles
	outcome Outcome // opSettle
	d       int64   // opAdvance
	note    string  // why this advance was chosen
}

func (o refOp) String() string {
	switch o.kind {
	case opAllow:
		return fmt.Sprintf("p%d := AllowAt(now)", o.id)
	case opSettle:
		return fmt.Sprintf("p%d.recordAt(now, %v)", o.target, []string{"Success", "Failure", "Ignored"}[o.outcome])
	default:
		s := fmt.Sprintf("Advance(%v)", time.Duration(o.d))
		if o.note != "" {
			s += "  // " + o.note
		}
		return s
	}
}

var refErrName = func(err error) string {
	switch err {
	case nil:
		return "nil"
	case ErrBlocked:
		return "ErrBlocked"
	case errProbesBusy:
		return "errProbesBusy"
	}
	return fmt.Sprintf("%q", err)
}

// refRun replays ops on a fresh Circuit and model and returns a description of
// the first mismatch, with the index of the op after which it showed, or ""
// and -1. Settling a promise whose AllowAt was removed is skipped.
//
// With sparse set, StatsAt is compared only after every 17th op (and
// State, Generation and AllowAt's error after every op): reading the window
// caches part of its totals, and a reading after every op could hide a stale
// cache that only the circuit's own trip check would read.
func refRun(cfg refConfig, ops []refOp, sparse bool) (msg string, at int) {
	clk := clock.NewManual(0)
	var calls []Stats
	c, err := NewCircuit(cfg.strategy(&calls), cfg.options(clk)...)
	if err != nil {
		return "NewCircuit: " + err.Error(), -1
	}
	defer c.closeListener()
	m := newRefCircuit(cfg)
	type pair struct {
		real  Promise
		model *refPromise
	}
	promises := map[int]pair{}
	at = -1
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("panic: %v", r)
		}
	}()
	for i, op := range ops {
		at = i
		now := clk.Now()
		switch op.kind {
		case opAllow:
			rp, rerr := c.AllowAt(now)
			mp, merr := m.allow(now)
			promises[op.id] = pair{rp, mp}
			if rerr != merr {
				return fmt.Sprintf("AllowAt(%d) error = %s, model %s", now, refErrName(rerr), refErrName(merr)), i
			}
		case opSettle:
			p, ok := promises[op.target]
			if !ok {
				continue
			}
			p.real.recordAt(now, op.outcome)
			m.record(p.model, now, op.outcome)
		case opAdvance:
			clk.Advance(time.Duration(op.d))
		}
		now = clk.Now()
		if s, w := c.current(), m.state; s != w {
			return fmt.Sprintf("State() = %v, model %v", s, w), i
		}
		if g, w := c.Stats().Generation, m.gen; g != w {
			return fmt.Sprintf("Generation() = %d, model %d", g, w), i
		}
		if !slices.Equal(calls, m.calls) {
			return fmt.Sprintf("TripWhen's condition called with\n   got  %+v\n   want %+v", calls, m.calls), i
		}
		if sparse && i%17 != 16 && i != len(ops)-1 {
			continue
		}
		got, want := c.StatsAt(now), m.stats(now)
		if math.Abs(got.BlockRatio-want.BlockRatio) < 1e-12 {
			got.BlockRatio = want.BlockRatio // compared with a tolerance
		}
		if got != want {
			return fmt.Sprintf("StatsAt(%d)\n   got  %+v\n   want %+v", now, got, want), i
		}
	}
	return "", -1
}

// ---------------------------------------------------------------------------
// Random configurations and sequences

func refRandomConfig(r *rand.Rand) refConfig {
	var c refConfig
	sec := int64(time.Second)
	c.buckets = []int64{1, 4, 10}[r.IntN(3)]
	c.window = (1 + r.Int64N(10)) * sec // 1s..10s; divisible by 1, 4 and 10
	w := c.window / c.buckets
	c.kind = refStrategyKind(r.IntN(int(refKinds)))
	switch c.kind {
	case refErrorRatio:
		c.threshold = []float64{0.1, 0.25, 1.0 / 3, 0.5, 0.6, 1}[r.IntN(6)]
	case refErrorCount:
		c.count = 1 + r.Int64N(5)
	case refSlowRatio:
		c.threshold = []float64{0.2, 1.0 / 3, 0.5, 1}[r.IntN(4)]
		c.maxRT = []int64{w / 2, w, 100 * int64(time.Millisecond), c.window / 3, 1 + r.Int64N(c.window)}[r.IntN(5)]
	case refConsecutive:
		c.count = 1 + r.Int64N(6)
	case refTripWhen:
		c.condition = r.IntN(len(refConditions))
	}
	c.minRequests = []int64{-1, 0, 1, 5}[r.IntN(4)]
	if r.IntN(5) > 0 {
		c.openTimeout = []int64{sec / 2, sec, 2 * sec, 3 * sec, 5 * sec, w, 1 + r.Int64N(3*c.window)}[r.IntN(7)]
	}
	t := c.effT()
	switch r.IntN(3) {
	case 0: // no backoff
	case 1:
		c.backoff = t * []int64{1, 2, 3, 4, 8, 100}[r.IntN(6)]
	case 2:
		c.backoff = t + r.Int64N(10*t)
	}
	if r.IntN(5) > 0 {
		c.probes = 1 + r.IntN(4)
		switch r.IntN(5) {
		case 0:
			c.probeTO = 0
		case 1:
			c.probeTO = t / 2
		case 2:
			c.probeTO = t
		case 3:
			c.probeTO = 2 * t
		case 4:
			c.probeTO = 1 + r.Int64N(2*t)
		}
	}
	return c
}

// refGenerate drives a model through a random sequence of n operations and
// returns them. The model's state steers the choice of advances towards the
// boundaries that matter: bucket edges, the end of the open timeout, probe
// timeouts and a slow request's maxRT.
func refGenerate(r *rand.Rand, cfg refConfig, n int) []refOp {
	m := newRefCircuit(cfg)
	now := int64(0)
	pFail := 0.05 + 0.9*r.Float64()
	pIgnore := 0.2 * r.Float64()
	pAllow := 0.3 + 0.3*r.Float64()
	pAdvance := 0.08 + 0.2*r.Float64()
	type live struct {
		id int
		p  *refPromise
	}
	var outstanding, settled []live
	var ops []refOp
	nextID := 0
	for len(ops) < n {
		x := r.Float64()
		switch {
		case x < pAdvance:
			var d int64
			var note string
			switch r.IntN(11) {
			case 0:
				d = 0
			case 10: // rarely, far: whole windows (the ring wraps), maybe plus a bit
				if r.IntN(4) == 0 {
					d = (2 + r.Int64N(50)) * cfg.window
					if r.IntN(2) == 0 {
						d += r.Int64N(cfg.window)
					}
					note = "far"
				}
			case 1: // to the next bucket boundary
				d = m.w - now%m.w
				note = "next bucket"
			case 2: // one whole bucket
				d = m.w
				note = "one bucket"
			case 3: // to the end of the open timeout, or just short of it
				if m.state == Open && m.openUntil > now {
					d = m.openUntil - now - r.Int64N(2)
					note = "openUntil"
				}
			case 4: // to a probe's timeout, or just short of it
				if len(m.inFlight) > 0 {
					p := m.inFlight[r.IntN(len(m.inFlight))]
					if e := p.start + m.cfg.effP() - now; e >= 0 {
						d = e - r.Int64N(2)
						note = "probe timeout"
					}
				}
			case 5: // to a promise's maxRT (or one past)
				if len(outstanding) > 0 && cfg.kind == refSlowRatio {
					p := outstanding[r.IntN(len(outstanding))].p
					if !p.zero {
						if e := p.start + cfg.maxRT + r.Int64N(2) - now; e >= 0 {
							d = e
							note = "maxRT"
						}
					}
				}
			case 6: // the whole window
				d = cfg.window
				note = "window"
			default:
				d = r.Int64N(cfg.window + cfg.window/5)
			}
			if d < 0 {
				d = 0
			}
			now += d
			ops = append(ops, refOp{kind: opAdvance, d: d, note: note})
		case x < pAdvance+pAllow || len(outstanding) == 0:
			p, _ := m.allow(now)
			ops = append(ops, refOp{kind: opAllow, id: nextID})
			if !p.zero || r.IntN(4) == 0 {
				outstanding = append(outstanding, live{nextID, p})
			}
			nextID++
		default:
			var l live
			if len(settled) > 0 && r.IntN(12) == 0 {
				l = settled[r.IntN(len(settled))] // settle twice
			} else {
				// Favour older promises somewhat, to let probes time out.
				i := r.IntN(len(outstanding))
				if r.IntN(3) == 0 {
					i = 0
				}
				l = outstanding[i]
				outstanding = append(outstanding[:i], outstanding[i+1:]...)
				settled = append(settled, l)
				if len(settled) > 16 {
					settled = settled[1:]
				}
			}
			o := Success
			if y := r.Float64(); y < pIgnore {
				o = Ignored
			} else if y < pIgnore+pFail {
				o = Failure
			}
			m.record(l.p, now, o)
			ops = append(ops, refOp{kind: opSettle, target: l.id, outcome: o})
		}
	}
	return ops
}

// refMinimise removes ops while the replay still mismatches.
func refMinimise(cfg refConfig, ops []refOp, sparse bool) []refOp {
	fails := func(o []refOp) bool { msg, _ := refRun(cfg, o, sparse); return msg != "" }
	if _, at := refRun(cfg, ops, sparse); at >= 0 {
		ops = ops[:at+1]
	}
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(ops); {
			try := append(append([]refOp{}, ops[:i]...), ops[i+chunk:]...)
			if fails(try) {
				ops = try
				if _, at := refRun(cfg, ops, sparse); at >= 0 {
					ops = ops[:at+1]
				}
			} else {
				i++
			}
		}
	}
	// Merge adjacent advances.
	for i := 0; i+1 < len(ops); {
		if ops[i].kind == opAdvance && ops[i+1].kind == opAdvance {
			try := append([]refOp{}, ops...)
			try[i].d += try[i+1].d
			try[i].note = ""
			try = append(try[:i+1], try[i+2:]...)
			if fails(try) {
				ops = try
				continue
			}
		}
		i++
	}
	// Shrink advances.
	for i := range ops {
		if ops[i].kind != opAdvance {
			continue
		}
		for ops[i].d > 0 {
			old := ops[i].d
			ops[i].d = old / 2
			if !fails(ops) {
				ops[i].d = old
				break
			}
		}
	}
	return ops
}

func refFormat(cfg refConfig, ops []refOp) string {
	var b strings.Builder
	clk := int64(0)
	for _, o := range ops {
		if o.kind == opAdvance {
			clk += o.d
			fmt.Fprintf(&b, "\t%-50s now=%d\n", o.String(), clk)
		} else {
			fmt.Fprintf(&b, "\t%s\n", o.String())
		}
	}
	return b.String()
}

func TestModelCircuitDifferential(t *testing.T) {
	seqs, n := 2000, 300
	if testing.Short() {
		seqs = 300
	}
	if v, err := strconv.Atoi(os.Getenv("SLIDEGATE_MODEL_SEQS")); err == nil && v > 0 {
		seqs = v // for a longer soak: SLIDEGATE_MODEL_SEQS=100000 go test -run Model
	}
	failures := 0
	for seed := uint64(1); seed <= uint64(seqs); seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		cfg := refRandomConfig(r)
		ops := refGenerate(r, cfg, n)
		sparse := seed%4 == 0
		msg, _ := refRun(cfg, ops, sparse)
		if msg == "" {
			continue
		}
		min := refMinimise(cfg, ops, sparse)
		msg2, _ := refRun(cfg, min, sparse)
		t.Errorf("seed %d: config %v (stats compared sparsely: %v)\n  first mismatch (full sequence): %s\n  minimised (%d ops, %d originally): %s\n%s",
			seed, cfg, sparse, msg, len(min), len(ops), msg2, refFormat(cfg, min))
		if failures++; failures >= 5 {
			t.Fatal("too many mismatches; stopping")
		}
	}
}

// TestModelCircuitCoverage checks that the random sequences reach the states
// and transitions the differential test is meant to exercise, under every
// kind of strategy.
func TestModelCircuitCoverage(t *testing.T) {
	var trips, halfOpens, closes, probeTimeouts, busy, backoffs int
	var tripsBy [refKinds]int
	var brokenRuns, conditionFalse int // ConsecutiveFailures trips with failures before the run; TripWhen calls that did not trip
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		cfg := refRandomConfig(r)
		ops := refGenerate(r, cfg, 300)
		m := newRefCircuit(cfg)
		ps := map[int]*refPromise{}
		now := int64(0)
		for _, op := range ops {
			before, k := m.state, m.failedK
			switch op.kind {
			case opAllow:
				p, err := m.allow(now)
				ps[op.id] = p
				if err == errProbesBusy {
					busy++
				}
				if before == HalfOpen && m.state == Open {
					probeTimeouts++
				}
			case opSettle:
				calls := len(m.calls)
				m.record(ps[op.target], now, op.outcome)
				if len(m.calls) > calls && m.state == Closed {
					conditionFalse++
				}
			case opAdvance:
				now += op.d
			}
			switch {
			case before == Closed && m.state == Open:
				trips++
				tripsBy[cfg.kind]++
				if w := m.totals(now); cfg.kind == refConsecutive && w.fail > w.run {
					brokenRuns++
				}
			case before != HalfOpen && m.state == HalfOpen:
				halfOpens++
			case before == HalfOpen && m.state == Closed:
				closes++
			}
			if m.failedK > k && m.openTimeoutFor(m.failedK) > m.cfg.effT() {
				backoffs++
			}
		}
	}
	t.Logf("trips %d (by strategy %v), half-opens %d, closes %d, probe timeouts %d, probes busy %d, backed-off opens %d",
		trips, tripsBy, halfOpens, closes, probeTimeouts, busy, backoffs)
	t.Logf("ConsecutiveFailures trips after a broken run %d, TripWhen conditions false %d", brokenRuns, conditionFalse)
	if trips < 100 || halfOpens < 100 || closes < 30 || probeTimeouts < 10 || busy < 30 || backoffs < 10 {
		t.Error("the random sequences cover too little")
	}
	for kind, n := range tripsBy {
		if n < 10 {
			t.Errorf("strategy kind %d tripped %d times, want at least 10", kind, n)
		}
	}
	if brokenRuns < 5 || conditionFalse < 20 {
		t.Error("the random sequences cover too little of ConsecutiveFailures and TripWhen")
	}
}
