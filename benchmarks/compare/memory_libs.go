package compare

import (
	"context"
	"fmt"

	sapi "github.com/alibaba/sentinel-golang/api"
	scb "github.com/alibaba/sentinel-golang/core/circuitbreaker"
	sflow "github.com/alibaba/sentinel-golang/core/flow"
	sstat "github.com/alibaba/sentinel-golang/core/stat"
	zbreaker "github.com/zeromicro/go-zero/core/breaker"

	"github.com/slidegate/slidegate"
)

// The libraries of the memory table and how each makes a resource in each
// configuration. The rules are the guard rows' (guard.go): a QPS limit of
// 2^30 per second that blocks rather than waits, and an error-ratio breaker
// with the Circuit's defaults (0.5 over 10 s in 10 buckets, at least 10
// requests, open for 5 s). Every resource is entered and exited with
// success, so every request is allowed.

// MemoryLibraries returns the columns of the memory table: slidegate,
// sentinel-golang and go-zero, with the versions this build uses.
func MemoryLibraries() []MemoryLibrary {
	return []MemoryLibrary{
		{Name: "slidegate", Ours: true, cell: slidegateCell},
		{Name: versioned("sentinel-golang", "github.com/alibaba/sentinel-golang"), cell: sentinelCell},
		{Name: versioned("go-zero", "github.com/zeromicro/go-zero"), cell: goZeroCell},
	}
}

// versioned returns name followed by the version of module path in this
// build, if the build says.
func versioned(name, path string) string {
	if v := moduleVersion(path); v != "" {
		return name + " " + v
	}
	return name
}

// slidegateCell makes resources in a guard raised to hold all of them
// (WithMaxResources): with no rules, each is made by its first Enter; with
// rules, by SetRules, which binds each resource's QPS rule and breaker.
// The guard is made between the readings, so that anything it sizes by its
// bound is counted; its own two resources (inbound traffic and
// OtherResource) add at most a few bytes per resource to the figure.
func slidegateCell(c MemoryConfig) (newResidents, string) {
	return func(n int) (*residents, error) {
		var (
			g     *slidegate.Guard
			ns    = newNamespace()
			names []string
			ctx   = context.Background()
		)
		enter := func(i int) error {
			e, err := g.Enter(ctx, names[i])
			if err != nil {
				return fmt.Errorf("slidegate: enter %s: %w", names[i], err)
			}
			e.Exit(nil)
			return nil
		}
		return &residents{
			make: func() error {
				var err error
				if g, err = slidegate.New(slidegate.WithMaxResources(n)); err != nil {
					return err
				}
				names = ns.names(n)
				if c.withRules() {
					rules := slidegate.Rules{Flow: make([]slidegate.FlowRule, n), Breakers: make([]slidegate.BreakerRule, n)}
					for i, name := range names {
						rules.Flow[i] = slidegate.FlowRule{Resource: name, Limit: guardLimit}
						rules.Breakers[i] = slidegate.BreakerRule{Resource: name, Strategy: slidegate.ErrorRatioBreaker, Threshold: breakerRatio}
					}
					if err := g.SetRules(rules); err != nil {
						return err
					}
				}
				for i := range n {
					if err := enter(i); err != nil {
						return err
					}
				}
				return nil
			},
			enter:  enter,
			forget: func() { names = nil },
			check: func(ops int) error {
				for i := range n {
					name := ns.name(i)
					s, ok := g.Stats(name)
					if !ok {
						return fmt.Errorf("slidegate: %s: %w", name, errMissing)
					}
					if want := int64(1 + ops); s.Totals.Allowed != want {
						return fmt.Errorf("slidegate: %s allowed %d requests, want %d", name, s.Totals.Allowed, want)
					}
				}
				if r := g.Rules(); c.withRules() && (len(r.Flow) != n || len(r.Breakers) != n) {
					return fmt.Errorf("slidegate: %d flow rules and %d breakers in force, want %d of each", len(r.Flow), len(r.Breakers), n)
				}
				return nil
			},
			release: func() { g = nil },
		}, nil
	}, ""
}

// sentinelCell makes resources in sentinel's global state, with its default
// configuration and its console logger at errors only, as in the speed rows
// (api.InitDefault is not called: the metric log task and system collectors
// it starts keep nothing per resource). A resource's statistics are made by
// its first Entry, or by loading a flow rule that reads them; the rules are
// loaded all at once, with flow.LoadRules and circuitbreaker.LoadRules, as
// a service loads its rules. Release clears the rules and the map of
// resource statistics, which sentinel otherwise keeps for the life of the
// process.
func sentinelCell(c MemoryConfig) (newResidents, string) {
	return func(n int) (*residents, error) {
		quietSentinel()
		sentinelRelease() // whatever the other rows left
		ns := newNamespace()
		var names []string
		enter := func(i int) error {
			e, blocked := sapi.Entry(names[i])
			if blocked != nil {
				return fmt.Errorf("sentinel: %s blocked: %v", names[i], blocked)
			}
			e.Exit()
			return nil
		}
		return &residents{
			make: func() error {
				names = ns.names(n)
				if c.withRules() {
					flowRules := make([]*sflow.Rule, n)
					cbRules := make([]*scb.Rule, n)
					for i, name := range names {
						flowRules[i] = &sflow.Rule{
							Resource:               name,
							TokenCalculateStrategy: sflow.Direct,
							ControlBehavior:        sflow.Reject,
							Threshold:              guardLimit,
							StatIntervalInMs:       1000,
						}
						r := sentinelRule(name, scb.ErrorRatio, breakerOpen)
						cbRules[i] = &r
					}
					if _, err := sflow.LoadRules(flowRules); err != nil {
						return fmt.Errorf("sentinel: flow rules: %w", err)
					}
					if _, err := scb.LoadRules(cbRules); err != nil {
						return fmt.Errorf("sentinel: circuit-breaker rules: %w", err)
					}
				}
				for i := range n {
					if err := enter(i); err != nil {
						return err
					}
				}
				return nil
			},
			enter:  enter,
			forget: func() { names = nil },
			check: func(int) error {
				if got := len(sstat.ResourceNodeList()); got != n {
					return fmt.Errorf("sentinel: statistics of %d resources, want %d", got, n)
				}
				for i := range n {
					name := ns.name(i)
					if sstat.GetResourceNode(name) == nil {
						return fmt.Errorf("sentinel: %s: %w", name, errMissing)
					}
					if c.withRules() && (len(sflow.GetRulesOfResource(name)) != 1 || len(scb.GetRulesOfResource(name)) != 1) {
						return fmt.Errorf("sentinel: %s: rules %w", name, errMissing)
					}
				}
				return nil
			},
			release: sentinelRelease,
		}, nil
	}, ""
}

// sentinelRelease clears sentinel's flow and circuit-breaker rules and its
// map of resource statistics.
func sentinelRelease() {
	_ = sflow.ClearRules()
	_ = scb.ClearRules()
	sstat.ResetResourceNodeMap()
}

// goZeroCell makes go-zero breakers. go-zero keeps no statistics per name
// unless a breaker does, so the rows without rules have no figure; with
// rules, each resource is a NewBreaker() (its Google SRE breaker and its
// 40-bucket rolling window, named at random), used once with Do. The slice
// that holds the breakers stands for the table a service would keep them in.
func goZeroCell(c MemoryConfig) (newResidents, string) {
	if !c.withRules() {
		return nil, "go-zero keeps no statistics per name without a breaker: nothing to measure."
	}
	return func(n int) (*residents, error) {
		var bs []zbreaker.Breaker
		enter := func(i int) error {
			if err := bs[i].Do(succeed); err != nil {
				return fmt.Errorf("go-zero: breaker %d: %w", i, err)
			}
			return nil
		}
		return &residents{
			make: func() error {
				bs = make([]zbreaker.Breaker, n)
				for i := range bs {
					bs[i] = zbreaker.NewBreaker()
					if err := enter(i); err != nil {
						return err
					}
				}
				return nil
			},
			enter: enter,
			check: func(int) error {
				for i, b := range bs {
					if b == nil {
						return fmt.Errorf("go-zero: breaker %d: %w", i, errMissing)
					}
				}
				return nil
			},
			release: func() { bs = nil },
		}, nil
	}, "breaker only: a NewBreaker() used once with Do, and its place in a []Breaker; go-zero has no local QPS limiter (core/limit keeps its counts in Redis)."
}
