package slidegate

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// The guard's bounds: what a caller, or a client whose input names
// resources, can make it hold.

func TestResourceCapIsExactUnderConcurrentNewNames(t *testing.T) {
	const max, callers = 100, 1000
	g, _ := newGuard(t, Rules{}, WithMaxResources(max))
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range callers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			if e, err := g.Enter(bg, fmt.Sprintf("r%d", i)); err == nil {
				e.Exit(nil)
			}
		}()
	}
	start.Done()
	done.Wait()
	own := 0
	for _, s := range g.Resources() {
		if s.Resource != OtherResource {
			own++
		}
	}
	if own != max {
		t.Fatalf("%d resources with statistics of their own, want exactly the cap %d", own, max)
	}
	if n := g.resources.n.Load(); n != max {
		t.Fatalf("the table counts %d resources, holds %d", n, own)
	}
	if s := stats(t, g, OtherResource); s.Allowed != callers-max {
		t.Fatalf("other counted %d, want the %d beyond the cap", s.Allowed, callers-max)
	}
}

func TestLongNamesAreRefusedInRulesAndCountedAsOther(t *testing.T) {
	long := strings.Repeat("x", bounds.MaxNameLength+1)
	err := Rules{
		Flow:     []FlowRule{{Resource: long, Limit: 1}, {Resource: "a", RefResource: long, Limit: 1}},
		Breakers: []BreakerRule{{Resource: long, Strategy: SREBreaker}},
	}.Validate()
	var re *RulesError
	if !errors.As(err, &re) || len(re.Problems) != 3 {
		t.Fatalf("Validate: %v, want 3 problems", err)
	}
	for i, want := range []struct{ rule, field string }{{"flow[0]", "resource"}, {"flow[1]", "ref_resource"}, {"breakers[0]", "resource"}} {
		p := re.Problems[i]
		if p.Rule != want.rule || p.Field != want.field || !strings.Contains(p.Reason, fmt.Sprintf("%d bytes", bounds.MaxNameLength+1)) {
			t.Errorf("problem %d = %+v, want %s's %s, saying how long it is", i, p, want.rule, want.field)
		}
		if len(p.String()) > 200 {
			t.Errorf("problem %d is %d bytes long: %s", i, len(p.String()), p)
		}
	}
	g, _ := newGuard(t, Rules{})
	for i := range 100 {
		mustEnter(t, g, long+fmt.Sprint(i)).Exit(nil)
	}
	mustEnter(t, g, long[:bounds.MaxNameLength]).Exit(nil) // at the cap: a resource of its own
	if rs := g.Resources(); len(rs) != 2 || rs[0].Resource != OtherResource || rs[0].Allowed != 100 {
		t.Fatalf("resources = %+v, want the long names in %s and the one at the cap", rs, OtherResource)
	}
}

// TestEvictionNeverLosesAResourceARuleNames makes a rule name a resource
// while the table evicts it for idleness: the rule's resource must stay in
// the table, where Stats and Resources find it.
func TestEvictionNeverLosesAResourceARuleNames(t *testing.T) {
	g, clk := newGuard(t, Rules{}, WithMaxResources(1))
	mustEnter(t, g, "x").Exit(nil)
	clk.Advance(statsInterval + 2*time.Second) // x is idle: a new name evicts it
	var loaded sync.WaitGroup
	loaded.Add(1)
	evictHook = func() {
		evictHook = nil
		// A SetRules naming x runs while the table decides to evict x.
		go func() {
			defer loaded.Done()
			if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "x", Limit: 5}}}); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(50 * time.Millisecond) // let it run, if nothing stops it
	}
	defer func() { evictHook = nil }()
	mustEnter(t, g, "y").Exit(nil)
	loaded.Wait()
	if _, ok := g.Stats("x"); !ok {
		t.Fatal("the resource a rule names is not in the table")
	}
	for range 6 {
		if e, err := g.Enter(bg, "x"); err == nil {
			e.Exit(nil)
		}
	}
	if s := stats(t, g, "x"); s.Allowed != 5 || s.Blocked != 1 {
		t.Fatalf("x = %+v, want its rule's 5 passes and 1 block in its statistics", s)
	}
}

func TestCountsAboveMaxLimitAreClampedAndTotalsNeverWrap(t *testing.T) {
	if _, err := flow.NewQPS(flow.QPSSettings{Limit: flowlimits.MaxLimit, Interval: time.Second}); err != nil {
		t.Fatalf("a limiter of flowlimits.MaxLimit = %d: %v, want it taken", int64(flowlimits.MaxLimit), err)
	}
	if _, err := flow.NewQPS(flow.QPSSettings{Limit: flowlimits.MaxLimit + 1, Interval: time.Second}); err == nil {
		t.Fatalf("a limiter of flowlimits.MaxLimit+1 = %d was taken: flowlimits.MaxLimit is not the limiters' maximum", int64(flowlimits.MaxLimit)+1)
	}
	g, clk := newGuard(t, Rules{Flow: []FlowRule{{Resource: "limited", Limit: flowlimits.MaxLimit}}})
	var last Totals
	for i := range 5 {
		e := mustEnter(t, g, "a", WithCount(math.MaxInt64))
		clk.Advance(time.Hour)
		e.Exit(nil)
		tot := stats(t, g, "a").Totals
		if i == 0 && (tot.Allowed != flowlimits.MaxLimit || tot.Succeeded != flowlimits.MaxLimit) {
			t.Fatalf("totals = %+v, want a batch of flowlimits.MaxLimit", tot)
		}
		if tot.Allowed < last.Allowed || tot.Succeeded < last.Succeeded || tot.RT < last.RT || tot.RT <= 0 {
			t.Fatalf("totals went from %+v to %+v", last, tot)
		}
		last = tot
	}
	// Each batch ended in a bucket of its own, which holds at most
	// maxBucketValue µs of response time: a window.Counter's bucket holds
	// values up to 2^39-1.
	const maxBucketValue = 1<<39 - 1
	if want := 5 * maxBucketValue * time.Microsecond; last.RT != want {
		t.Fatalf("RT total = %v, want five buckets' most, %v", last.RT, want)
	}
	// A batch of flowlimits.MaxLimit fits a limit of flowlimits.MaxLimit; nothing more does.
	mustEnter(t, g, "limited", WithCount(math.MaxInt64)).Exit(nil)
	mustBlock(t, g, "limited", "qps", flow.RateLimited)
}
