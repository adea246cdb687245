package flow

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/flowlimits"
	"github.com/slidegate/slidegate/internal/stripe"
)

func TestRetryBudgetRejectsBadConfigNamingFieldAndValue(t *testing.T) {
	cases := []struct {
		name     string
		ratio    float64
		min      int64
		interval time.Duration
		buckets  int
		option   string
		value    any
	}{
		{"negative ratio", -0.1, 10, time.Second, 0, "ratio", -0.1},
		{"NaN ratio", math.NaN(), 10, time.Second, 0, "ratio", nil},
		{"ratio above max", flowlimits.MaxRetryRatio + 1, 10, time.Second, 0, "ratio", float64(flowlimits.MaxRetryRatio + 1)},
		{"infinite ratio", math.Inf(1), 10, time.Second, 0, "ratio", math.Inf(1)},
		{"negative floor", 0.2, -1, time.Second, 0, "min_per_second", int64(-1)},
		{"floor above max", 0.2, maxLimit, 10 * time.Second, 0, "min_per_second", int64(maxLimit)},
		{"negative interval", 0.2, 10, -time.Second, 0, "interval", -time.Second},
		{"interval not divisible", 0.2, 10, 7, 3, "interval", time.Duration(7)},
		{"negative buckets", 0.2, 10, time.Second, -1, "buckets", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := NewRetryBudget(RetryBudgetSettings{Ratio: c.ratio, MinPerSecond: c.min, Interval: c.interval, Buckets: c.buckets})
			if b != nil || err == nil {
				t.Fatalf("NewRetryBudget = %v, %v; want an error", b, err)
			}
			var ce *configError
			if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %v is not a *configError wrapping config.ErrInvalid", err)
			}
			if ce.Field != c.option {
				t.Fatalf("Field = %q, want %q (%v)", ce.Field, c.option, err)
			}
			if c.value != nil && ce.Value != c.value {
				t.Fatalf("Value = %#v, want %#v", ce.Value, c.value)
			}
			if f, ok := ce.Value.(float64); c.name == "NaN ratio" && !(ok && math.IsNaN(f)) {
				t.Fatalf("Value = %#v, want NaN", ce.Value)
			}
		})
	}
	if _, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10}); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if _, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0, MinPerSecond: 0, Interval: time.Second, Buckets: 1}); err != nil {
		t.Fatalf("a budget that never retries is valid: %v", err)
	}
}

// retryModel is the reference: the bucket rule of RetryBudget written out
// with maps and division, and every event kept with the time it was counted
// at, to check the promised bound in continuous time.
type retryModel struct {
	k, w           int64
	ratio, floor   float64
	requests       map[int64]int64
	retries        map[int64]int64
	open, latest   int64   // the latest bucket and time counted
	reqAt, retryAt []int64 // the times events were counted at
	// The bucket of the latest decision, and the retries given back after
	// it from sealed buckets, which the decisions of that bucket still
	// count (RetryBudget keeps their sum), staleIn's.
	decidedIn, stale, staleIn int64
}

func newRetryModel(ratio float64, minPerSecond int64, interval time.Duration, k int) *retryModel {
	return &retryModel{
		k: int64(k), w: int64(interval) / int64(k), ratio: ratio,
		floor:    float64(minPerSecond) * interval.Seconds(),
		requests: map[int64]int64{}, retries: map[int64]int64{},
		open: math.MinInt64, latest: math.MinInt64, decidedIn: math.MinInt64,
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// count returns the bucket and the time at which an event at now is
// counted: neither goes backwards.
func (m *retryModel) count(now int64) (int64, int64) {
	m.open = max(m.open, floorDiv(now, m.w))
	m.latest = max(m.latest, now)
	return m.open, m.latest
}

func (m *retryModel) request(now int64) {
	b, at := m.count(now)
	m.requests[b]++
	m.reqAt = append(m.reqAt, at)
}

func (m *retryModel) retry(now int64) bool {
	b, at := m.count(now)
	m.decidedIn = b
	var retried, requested int64
	for j := b - m.k; j <= b; j++ {
		retried += m.retries[j]
		if j > b-m.k {
			requested += m.requests[j]
		}
	}
	if b == m.staleIn {
		retried += m.stale
	}
	if float64(retried+1) > m.ratio*float64(requested)+m.floor {
		return false
	}
	m.retries[b]++
	m.retryAt = append(m.retryAt, at)
	return true
}

// giveBack uncounts a retry counted in bucket b at time at. Given back from
// a bucket before the open one once the open one has decided, it is still
// counted by the open bucket's decisions.
func (m *retryModel) giveBack(b, at int64) {
	if m.retries[b] == 0 {
		panic("a retry given back twice")
	}
	m.retries[b]--
	for i, x := range m.retryAt {
		if x == at {
			m.retryAt = append(m.retryAt[:i], m.retryAt[i+1:]...)
			break
		}
	}
	if b < m.open && m.decidedIn == m.open {
		if m.staleIn != m.open {
			m.stale, m.staleIn = 0, m.open
		}
		m.stale++
	}
}

// checkBound checks the promise at the retry just allowed at time t: the
// retries counted in (t-W, t] are at most ratio × the requests counted in
// (t-W, t] plus the floor.
func (m *retryModel) checkBound(t *testing.T, at int64) {
	t.Helper()
	W := m.k * m.w
	var retried, requested int64
	for _, x := range m.retryAt {
		if x > at-W && x <= at {
			retried++
		}
	}
	for _, x := range m.reqAt {
		if x > at-W && x <= at {
			requested++
		}
	}
	if float64(retried) > m.ratio*float64(requested)+m.floor {
		t.Fatalf("at %d: %d retries in the last interval against %d requests (ratio %v, floor %v)", at, retried, requested, m.ratio, m.floor)
	}
}

func TestRetryBudgetMatchesModelAndKeepsBoundInEveryInterval(t *testing.T) {
	configs := []struct {
		ratio    float64
		min      int64
		interval time.Duration
		k        int
	}{
		{0.2, 10, 10 * time.Second, 20},
		{0.5, 0, time.Second, 4},
		{0, 3, time.Second, 1},
		{1.5, 1, 2 * time.Second, 8},
		{0.1, 2, 3 * time.Second, 3},
	}
	for ci, c := range configs {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			start := rng.Int64N(int64(time.Hour)) - int64(30*time.Minute) // negative times too
			clk := clock.NewManual(start)
			b, err := NewRetryBudget(RetryBudgetSettings{Ratio: c.ratio, MinPerSecond: c.min, Interval: c.interval, Buckets: c.k, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			m := newRetryModel(c.ratio, c.min, c.interval, c.k)
			w := int64(c.interval) / int64(c.k)
			var allowedN, blockedN int
			for op := 0; op < 6000; op++ {
				switch r := rng.IntN(1000); {
				case r < 3:
					clk.Advance(time.Duration(rng.Int64N(3 * int64(c.interval))))
				case r < 400:
					clk.Advance(time.Duration(rng.Int64N(w / 8)))
				}
				now := clk.Now()
				if rng.IntN(20) == 0 {
					now -= rng.Int64N(2 * w) // a caller that read the clock a while ago
				}
				switch r := rng.IntN(100); {
				case r < 55:
					b.RequestAt(now)
					m.request(now)
				case r < 95:
					got, want := allowedRetry(b.RetryAt(now, AttemptFailed)), m.retry(now)
					if got != want {
						t.Fatalf("config %d seed %d op %d: RetryAt(%d) = %v, model says %v", ci, seed, op, now, got, want)
					}
					if got {
						allowedN++
						m.checkBound(t, m.retryAt[len(m.retryAt)-1])
					} else {
						blockedN++
					}
				default:
					a := AttemptProbe + Attempt(rng.IntN(3)) // probe, open, unknown
					if allowedRetry(b.RetryAt(now, a)) {
						t.Fatalf("RetryAt(%d, %v) allowed a retry", now, a)
					}
				}
			}
			if allowedN == 0 || blockedN == 0 {
				t.Fatalf("config %d seed %d: %d allowed, %d blocked: the test exercises only one side", ci, seed, allowedN, blockedN)
			}
		}
	}
}

// TestRetryBudgetGivingBackMatchesModelAndKeepsBound gives back, at random,
// retries granted in the last interval, and checks each decision against
// the model and the bound against the retries still counted.
func TestRetryBudgetGivingBackMatchesModelAndKeepsBound(t *testing.T) {
	configs := []struct {
		ratio    float64
		min      int64
		interval time.Duration
		k        int
	}{
		{0.2, 10, 10 * time.Second, 20},
		{0.5, 1, time.Second, 4},
		{0.3, 1, 2 * time.Second, 8},
		{0, 3, time.Second, 1},
	}
	type granted struct {
		g          Grant
		bucket, at int64 // the model's
	}
	for ci, c := range configs {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 100+uint64(ci)))
			clk := clock.NewManual(rng.Int64N(int64(time.Hour)) - int64(30*time.Minute))
			b, err := NewRetryBudget(RetryBudgetSettings{Ratio: c.ratio, MinPerSecond: c.min, Interval: c.interval, Buckets: c.k, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			m := newRetryModel(c.ratio, c.min, c.interval, c.k)
			w := int64(c.interval) / int64(c.k)
			var out []granted
			var gaveBack, allowedN, blockedN int
			for op := 0; op < 6000; op++ {
				if rng.IntN(400) < 150 {
					clk.Advance(time.Duration(rng.Int64N(w / 4)))
				}
				now := clk.Now()
				switch r := rng.IntN(100); {
				case r < 50:
					b.RequestAt(now)
					m.request(now)
				case r < 85:
					g, got := b.RetryAt(now, AttemptFailed)
					want := m.retry(now)
					if got != want {
						t.Fatalf("config %d seed %d op %d: RetryAt = %v, model says %v", ci, seed, op, got, want)
					}
					if got {
						allowedN++
						m.checkBound(t, m.latest)
						out = append(out, granted{g, m.open, m.latest})
					} else {
						blockedN++
					}
				default:
					// Give back a grant of the last interval: older ones no
					// decision counts any more.
					for len(out) > 0 && out[0].bucket < m.open-m.k {
						out = out[1:]
					}
					if len(out) == 0 {
						continue
					}
					i := rng.IntN(len(out))
					b.GiveBack(out[i].g)
					m.giveBack(out[i].bucket, out[i].at)
					out = append(out[:i], out[i+1:]...)
					gaveBack++
				}
			}
			if allowedN == 0 || blockedN == 0 || gaveBack == 0 {
				t.Fatalf("config %d seed %d: %d allowed, %d blocked, %d given back: the test exercises too little", ci, seed, allowedN, blockedN, gaveBack)
			}
		}
	}
}

// TestRetryBudgetGivesBackARetryNotSent: a retry given back makes room for
// another at once while its bucket is the latest, leaves Stats, and never
// uncounts a later bucket's retry that took its slot.
func TestRetryBudgetGivesBackARetryNotSent(t *testing.T) {
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0, MinPerSecond: 2, Interval: time.Second, Clock: clk, Buckets: 4}) // a floor of 2
	if err != nil {
		t.Fatal(err)
	}
	g1, ok1 := b.Retry(AttemptFailed)
	_, ok2 := b.Retry(AttemptFailed)
	if _, ok3 := b.Retry(AttemptFailed); !ok1 || !ok2 || ok3 {
		t.Fatalf("grants %v %v %v, want the floor's two", ok1, ok2, ok3)
	}
	b.GiveBack(g1)
	if st := b.statsAt(b.clock.Now()); st.Retries != 1 {
		t.Fatalf("%d retries in the stats after one was given back, want 1", st.Retries)
	}
	g3, ok := b.Retry(AttemptFailed)
	if !ok {
		t.Fatal("the retry given back made no room")
	}
	if allowedRetry(b.Retry(AttemptFailed)) {
		t.Fatal("a retry beyond the floor after the give back")
	}

	// Given back from a sealed bucket: the stats drop at once, and the
	// decisions of the bucket after the one that sealed it count it no
	// more.
	clk.Advance(250 * time.Millisecond)
	if allowedRetry(b.Retry(AttemptFailed)) {
		t.Fatal("a retry beyond the floor a bucket on")
	}
	b.GiveBack(g3)
	if st := b.statsAt(b.clock.Now()); st.Retries != 1 {
		t.Fatalf("%d retries in the stats, want 1", st.Retries)
	}
	if allowedRetry(b.Retry(AttemptFailed)) {
		t.Fatal("a retry allowed in the bucket whose decisions counted the one given back")
	}
	clk.Advance(250 * time.Millisecond)
	if !allowedRetry(b.Retry(AttemptFailed)) {
		t.Fatal("the retry given back from a sealed bucket made no room a bucket later")
	}

	// A grant whose slot a later bucket took gives back nothing.
	clk.Advance(10 * time.Second)
	old, _ := b.Retry(AttemptFailed)
	clk.Advance(8 * 250 * time.Millisecond) // the ring's 8 slots on: the same slot
	if _, ok := b.Retry(AttemptFailed); !ok {
		t.Fatal("no retry allowed")
	}
	b.GiveBack(old)
	b.GiveBack(Grant{})
	if st := b.statsAt(b.clock.Now()); st.Retries != 1 {
		t.Fatalf("%d retries in the stats, want the later bucket's 1", st.Retries)
	}
}

func TestRetryBudgetCountsRetriesWhenDecidedNotWhenSent(t *testing.T) {
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10, Interval: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		b.Request()
	}
	clk.Advance(time.Second)
	// 1000 requests fail at once; every retry waits in backoff before it is
	// sent, so none has been sent when the last is decided.
	allowed := 0
	for range 1000 {
		if allowedRetry(b.Retry(AttemptFailed)) {
			allowed++
		}
	}
	if want := 0.2*1000 + 10*10; allowed != int(want) {
		t.Fatalf("%d retries allowed for 1000 failures at once, want %v", allowed, want)
	}
	// The retries leave the budget an interval and a bucket after they
	// were counted, the requests an interval at most; the floor stays.
	if allowedRetry(b.Retry(AttemptFailed)) {
		t.Fatal("a retry allowed beyond the budget")
	}
	clk.Advance(10*time.Second + 500*time.Millisecond)
	allowed = 0
	for allowedRetry(b.Retry(AttemptFailed)) {
		allowed++
	}
	if allowed != 100 {
		t.Fatalf("%d retries allowed an interval later, want the floor, 100", allowed)
	}
}

func TestRetryBudgetNeverRetriesProbeOrOpenBreaker(t *testing.T) {
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 1, MinPerSecond: 100, Interval: time.Second, Clock: clock.NewManual(0)})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		b.Request()
	}
	for _, a := range []Attempt{AttemptProbe, AttemptBreakerOpen, 77} {
		if allowedRetry(b.Retry(a)) {
			t.Fatalf("Retry(%d) allowed a retry", a)
		}
	}
	// Those refusals took nothing from the budget.
	allowed := 0
	for allowedRetry(b.Retry(AttemptFailed)) {
		allowed++
	}
	if allowed != 200 {
		t.Fatalf("%d retries allowed, want 200", allowed)
	}
}

// Under a downstream that fails every request, three naive retries send four
// attempts per request; the budget's client sends at most 1 + ratio + the
// floor's share.
func TestRetryBudgetBoundsLoadUnderTotalFailure(t *testing.T) {
	const (
		ratio        = 0.2
		minPerSecond = 10
		rate         = 1000 // requests per second
		seconds      = 120
		maxRetries   = 3
	)
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: ratio, MinPerSecond: minPerSecond, Interval: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var requests, naive, budgeted int
	for range rate * seconds {
		clk.Advance(time.Second / rate)
		requests++
		b.Request()
		naive += 1 + maxRetries // every attempt fails, so all are retried
		budgeted++
		for range maxRetries {
			if !allowedRetry(b.Retry(AttemptFailed)) {
				break
			}
			budgeted++
		}
	}
	naiveLoad := float64(naive) / float64(requests)
	load := float64(budgeted) / float64(requests)
	bound := 1 + ratio + float64(minPerSecond)/rate
	t.Logf("attempts per request: naive %.3f, with the budget %.4f (bound %.3f)", naiveLoad, load, bound)
	if load > bound {
		t.Fatalf("with the budget: %.4f attempts per request, above %.3f", load, bound)
	}
	// The budget is spent, not merely blocked: at least 90% of what the
	// ratio allows (the buckets cost up to 2/(k+1)) plus the floor.
	if least := 1 + 0.9*ratio + float64(minPerSecond)/rate; load < least {
		t.Fatalf("with the budget: %.4f attempts per request, below %.3f", load, least)
	}
	if naiveLoad != 4 {
		t.Fatalf("naive: %.3f attempts per request, want 4", naiveLoad)
	}
}

// Many goroutines decide at once; the clock moves between phases, across
// bucket boundaries, so buckets open and are sealed while others decide. The
// counts must be exactly what one caller deciding alone would get.
func TestRetryBudgetConcurrentRetriesAreExact(t *testing.T) {
	const (
		workers  = 8
		perPhase = 40 // tries per worker per phase
		phases   = 400
		floor    = 50 // per second, over a 1 s interval
	)
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0, MinPerSecond: floor, Interval: time.Second, Buckets: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m := newRetryModel(0, floor, time.Second, 4)
	var rng = rand.New(rand.NewPCG(7, 7))
	for p := range phases {
		clk.Advance(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
		now := clk.Now()
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perPhase {
					if allowedRetry(b.RetryAt(now, AttemptFailed)) {
						allowed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		want := 0
		for range workers * perPhase {
			if m.retry(now) {
				want++
			}
		}
		if got := allowed.Load(); got != int64(want) {
			t.Fatalf("phase %d: %d retries allowed, a lone caller gets %d", p, got, want)
		}
	}
}

// Requests and retries from many goroutines while the clock moves under
// them: whatever the interleaving, no retry is allowed beyond what the
// requests counted in its window allow.
func TestRetryBudgetConcurrentRequestsAndRetriesKeepBound(t *testing.T) {
	const workers = 8
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.5, MinPerSecond: 0, Interval: time.Second, Buckets: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var requests, retries atomic.Int64
	var running atomic.Int64
	running.Store(workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for i := range 20000 {
				if (i+g)%3 == 0 {
					b.Request()
					requests.Add(1)
				} else if allowedRetry(b.Retry(AttemptFailed)) {
					retries.Add(1)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for running.Load() > 0 {
		clk.Advance(time.Duration(rng.Int64N(int64(time.Millisecond))))
		if rng.IntN(5000) == 0 {
			clk.Advance(5 * time.Second) // whole rings at once
		}
		runtime.Gosched()
	}
	wg.Wait()
	// Cut the buckets into blocks of k+1. The retries of a block were all
	// counted by its last retry, allowed against half the requests of the k
	// buckets ending at it, which lie in that block or the one before; so
	// each request backs at most two blocks, and retries are at most the
	// requests.
	if r, q := retries.Load(), requests.Load(); r > q || q == 0 {
		t.Fatalf("%d retries against %d requests at ratio 0.5", r, q)
	}
}

func TestRetryBudgetAllocatesNothing(t *testing.T) {
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10, Interval: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		clk.Advance(7 * time.Millisecond)
		b.Request()
		allowedRetry(b.Retry(AttemptFailed))
		allowedRetry(b.RetryAt(clk.Now(), AttemptProbe))
		if g, ok := b.Retry(AttemptFailed); ok {
			b.GiveBack(g)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Request+Retry+Retry+GiveBack", allocs)
	}
}

func BenchmarkRetryBudget(b *testing.B) {
	b.Run("baseline=time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	budget, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Request", func(b *testing.B) {
		for b.Loop() {
			budget.Request()
		}
	})
	b.Run("Retry", func(b *testing.B) {
		for b.Loop() {
			allowedRetry(budget.Retry(AttemptFailed))
		}
	})
	b.Run("RetryAt", func(b *testing.B) {
		now := clock.System.Now()
		for b.Loop() {
			allowedRetry(budget.RetryAt(now, AttemptFailed))
		}
	})
	allowing, err := NewRetryBudget(RetryBudgetSettings{Ratio: 1, MinPerSecond: 0, Interval: flowlimits.DefaultRetryInterval})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("RequestAt+RetryAt/allowed", func(b *testing.B) {
		now := clock.System.Now()
		for b.Loop() {
			allowing.RequestAt(now)
			if !allowedRetry(allowing.RetryAt(now, AttemptFailed)) {
				b.Fatal("blocked")
			}
		}
	})
	b.Run("Retry/parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				allowedRetry(budget.Retry(AttemptFailed))
			}
		})
	})
}

func TestRetryBudgetMemoryIsAsDocumented(t *testing.T) {
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
	if err != nil {
		t.Fatal(err)
	}
	size := int(unsafe.Sizeof(*b)) + 8*(len(b.requests)+len(b.retries))
	if size != 192+16*32 {
		t.Fatalf("a budget with the default buckets takes %d bytes besides its stripes, documented %d", size, 192+16*32)
	}
	if got, want := 8*len(b.notAllowed), 128*stripe.Count(); got != want {
		t.Fatalf("its stripes take %d bytes, documented %d", got, want)
	}
}

// The race a bucket ring must be designed for: a caller finds its bucket,
// and before it counts, later buckets open and decide without it. Callers
// read the clock themselves while it moves a bucket at a time; with a floor
// alone, every k+1 consecutive buckets may hold at most the floor, so the
// retries over the whole run are bounded by the floor per k+1 buckets.
func TestRetryBudgetLateCallersNeverOvershoot(t *testing.T) {
	const (
		workers = 4
		k       = 4
		floor   = 20 // per second, over a 1 s interval
		width   = 250 * time.Millisecond
	)
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0, MinPerSecond: floor, Interval: time.Second, Buckets: k, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, running atomic.Int64
	running.Store(workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			for range 20000 {
				if allowedRetry(b.RetryAt(clk.Now(), AttemptFailed)) {
					allowed.Add(1)
				}
			}
		}()
	}
	for running.Load() > 0 {
		clk.Advance(width)
		runtime.Gosched()
	}
	wg.Wait()
	buckets := clk.Now()/int64(width) + 1
	if most := floor * ((buckets + k) / (k + 1)); allowed.Load() > most {
		t.Fatalf("%d retries allowed over %d buckets, at most %d may be", allowed.Load(), buckets, most)
	}
	if allowed.Load() == 0 {
		t.Fatal("no retry allowed")
	}
}

// Stats reads the interval's requests and retries as the decisions count
// them, and the refusals by why.
func TestRetryBudgetStatsCountWhatWasDecided(t *testing.T) {
	clk := clock.NewManual(0)
	b, err := NewRetryBudget(RetryBudgetSettings{Ratio: 0.5, MinPerSecond: 1, Interval: time.Second, Clock: clk, Buckets: 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		b.Request()
	}
	retried := 0
	for range 10 {
		if allowedRetry(b.Retry(AttemptFailed)) {
			retried++
		}
	}
	allowedRetry(b.Retry(AttemptProbe))
	allowedRetry(b.Retry(AttemptBreakerOpen))
	if retried != 6 { // 0.5 × 10 + a floor of 1
		t.Fatalf("%d retries allowed, want 6", retried)
	}
	if st := b.statsAt(b.clock.Now()); st != (retryStats{Requests: 10, Retries: 6, Blocked: 4, NotRetried: 2}) {
		t.Fatalf("stats %+v, want 10 requests, 6 retries, 4 blocked, 2 not retried", st)
	}
	// Nine buckets on, they are still in the interval; ten on, gone.
	clk.Advance(900 * time.Millisecond)
	b.Request()
	if st := b.statsAt(b.clock.Now()); st.Requests != 11 || st.Retries != 6 {
		t.Fatalf("stats 900ms on %+v, want 11 requests, 6 retries", st)
	}
	clk.Advance(100 * time.Millisecond)
	if st := b.statsAt(b.clock.Now()); st.Requests != 1 || st.Retries != 0 || st.Blocked != 4 {
		t.Fatalf("stats an interval on %+v, want 1 request, no retries, the 4 blocked still", st)
	}
}

// allowedRetry is whether a retry was allowed, its grant left out.
func allowedRetry(_ Grant, ok bool) bool { return ok }
