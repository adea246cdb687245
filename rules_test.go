package slidegate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEveryProblemWithItsPlace(t *testing.T) {
	neg := int64(-1)
	for _, tc := range []struct {
		name  string
		rules Rules
		want  []string
	}{
		{"no resource", Rules{Flow: []FlowRule{{Limit: 1}}}, []string{`flow[0]: resource: missing`}},
		{"reserved resource", Rules{Flow: []FlowRule{{Resource: OtherResource, Limit: 1}}, Breakers: []BreakerRule{{Resource: OtherResource, Strategy: SREBreaker}}},
			[]string{`flow[0] (resource "(other)"): resource: "(other)" is the name of the resources the guard has no room for`, `breakers[0] (resource "(other)"): resource: "(other)"`}},
		{"negative limit and interval", Rules{Flow: []FlowRule{{Resource: "a", Limit: -1, Interval: Duration(-time.Second)}}},
			[]string{`flow[0] (resource "a"): limit: -1 must not be negative`, `flow[0] (resource "a"): interval: -1s must not be negative`}},
		{"unknown type", Rules{Flow: []FlowRule{{Resource: "a", Type: "bps"}}}, []string{`type: "bps" is not "qps", "throttle", "concurrency", "shed" or "adaptive"`}},
		{"concurrency with an interval", Rules{Flow: []FlowRule{{Resource: "a", Type: ConcurrencyRule, Interval: Duration(time.Second), MaxWait: 1}}},
			[]string{`interval: does not apply to a concurrency rule`, `max_wait: does not apply to a concurrency rule`}},
		{"cold factor", Rules{Flow: []FlowRule{{Resource: "a", WarmUp: Duration(time.Second), ColdFactor: 0.5}}}, []string{`cold_factor: 0.5 must be above 1`}},
		{"cold factor without warm-up", Rules{Flow: []FlowRule{{Resource: "a", ColdFactor: 2}}}, []string{`cold_factor: a cold factor needs a warm-up`}},
		{"warm-up too short", Rules{Flow: []FlowRule{{Resource: "a", Limit: 10, WarmUp: Duration(time.Second)}}}, []string{`flow[0] (resource "a"): warm_up: `}},
		{"cold factor above the limit", Rules{Flow: []FlowRule{{Resource: "a", Limit: 10, WarmUp: Duration(time.Minute), ColdFactor: 20}}}, []string{`flow[0] (resource "a"): cold_factor: `}},
		{"limit and lease above the most", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1 << 40, RefResource: "b"}, {Resource: "c", Limit: 1, Cluster: true, Lease: 1 << 40}}},
			[]string{`flow[0] (resource "a"): limit: 1099511627776 must be at most 4294967295`, `flow[1] (resource "c"): lease: 1099511627776 must be at most`}},
		{"ref buckets", Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, RefResource: "b", Buckets: 7}}}, []string{`buckets: a rule on another resource reads its statistics`}},
		{"throttle buckets without warm-up", Rules{Flow: []FlowRule{{Resource: "a", Limit: 10, Type: ThrottleRule, Buckets: 4}}}, []string{`buckets: a throttle's buckets divide its warm-up`}},
		{"throttle borrowing", Rules{Flow: []FlowRule{{Resource: "a", Type: ThrottleRule, Borrow: Duration(time.Second)}}}, []string{`borrow: does not apply to a throttle rule`}},
		{"own ref", Rules{Flow: []FlowRule{{Resource: "a", RefResource: "a"}}}, []string{`ref_resource: "a" is the rule's own resource`}},
		{"ref interval", Rules{Flow: []FlowRule{{Resource: "a", RefResource: "b", Interval: Duration(time.Minute)}}}, []string{`interval 1m0s: a rule on another resource`}},
		{"buckets", Rules{Flow: []FlowRule{{Resource: "a", Buckets: 3}}}, []string{`does not divide into 3 buckets`}},
		{"cluster throttle", Rules{Flow: []FlowRule{{Resource: "a", Cluster: true, Type: ThrottleRule, WarmUp: Duration(2 * time.Second)}}},
			[]string{`cluster: does not apply to a throttle rule`, `warm_up: a cluster rule has no warm-up`}},
		{"cluster concurrency", Rules{Flow: []FlowRule{{Resource: "a", Cluster: true, Type: ConcurrencyRule}}}, []string{`cluster: does not apply to a concurrency rule`}},
		{"lease", Rules{Flow: []FlowRule{{Resource: "a", Lease: 10}, {Resource: "b", Cluster: true, Lease: -1}}},
			[]string{`flow[0] (resource "a"): lease: only a cluster rule leases permits`, `flow[1] (resource "b"): lease: -1 must not be negative`}},
		{"cluster buckets", Rules{Flow: []FlowRule{{Resource: "a", Cluster: true, Buckets: 7}}}, []string{`does not divide into 7 buckets`}},
		{"cluster rules sharing a count", Rules{Flow: []FlowRule{{Resource: "a", Cluster: true, Limit: 10}, {Resource: "a", Limit: 5},
			{Resource: "a", Cluster: true, Limit: 100, Interval: Duration(time.Minute)}, {Resource: "a", Cluster: true, Limit: 20, Interval: Duration(time.Second), Buckets: 25}}},
			[]string{`flow[3] (resource "a"): cluster: flow[0] is a cluster rule of the same resource, interval (1s) and buckets (25)`}},
		{"missing strategy", Rules{Breakers: []BreakerRule{{Resource: "db"}}}, []string{`breakers[0] (resource "db"): strategy: missing`}},
		{"unknown strategy", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: "hystrix"}}}, []string{`strategy: "hystrix" is not one of`}},
		{"ratio", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorRatioBreaker, Threshold: 2}}}, []string{`threshold: 2 must be above 0 and at most 1`}},
		{"count", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker}}}, []string{`count: 0 must be at least 1`}},
		{"consecutive failures", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ConsecutiveFailuresBreaker, Threshold: 0.5}}},
			[]string{`threshold: does not apply to the consecutive_failures strategy`, `count: 0 must be at least 1`}},
		{"fields of another strategy", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorRatioBreaker, Threshold: 0.5, Count: 3, MaxRT: 1}}},
			[]string{`count: does not apply to the error_ratio strategy`, `max_rt: does not apply to the error_ratio strategy`}},
		{"slow", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: SlowRatioBreaker, Threshold: 0.5}}}, []string{`max_rt: 0s must be positive`}},
		{"negative min", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorRatioBreaker, Threshold: 0.5, MinRequests: &neg}}}, []string{`min_requests: -1 must not be negative`}},
		{"the old spelling of sre", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: "adaptive"}}}, []string{`strategy: "adaptive" is now spelt "sre"`}},
		{"SRE fields", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: SREBreaker, Threshold: 0.5, K: 0.5, BlockPolicy: "sometimes"}}},
			[]string{`threshold: does not apply to an SRE breaker`, `k: 0.5 must be at least 1`, `block_policy: "sometimes" is not one of`}},
		{"state fields", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 1, K: 2, Protection: &neg}}},
			[]string{`k: applies to an SRE breaker only`, `protection: applies to an SRE breaker only`}},
		{"backoff", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: ErrorCountBreaker, Count: 1, OpenTimeout: Duration(time.Minute), MaxOpenTimeout: Duration(time.Second)}}},
			[]string{`max_open_timeout: 1s must be at least open_timeout 1m0s`}},
		{"window", Rules{Breakers: []BreakerRule{{Resource: "db", Strategy: SREBreaker, Interval: Duration(time.Second), Buckets: 3}}}, []string{`does not divide into 3 buckets`}},
		{"several rules", Rules{Flow: []FlowRule{{Resource: "a", Limit: -1}, {Resource: "b"}, {Resource: "c", Limit: -2}},
			Breakers: []BreakerRule{{Resource: "d", Strategy: "x"}}},
			[]string{`flow[0] (resource "a"): limit: -1`, `flow[2] (resource "c"): limit: -2`, `breakers[0] (resource "d"): strategy`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rules.Validate()
			var re *RulesError
			if !errors.As(err, &re) {
				t.Fatalf("Validate: %v, want a *RulesError", err)
			}
			if len(re.Problems) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(re.Problems), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("no problem mentions %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestValidRulesPass(t *testing.T) {
	one := int64(1)
	r := Rules{
		Flow: []FlowRule{
			{Resource: "a", Limit: 100},
			{Resource: "a", Type: ConcurrencyRule, Limit: 10},
			{Resource: "b", Limit: 50, Type: ThrottleRule, MaxWait: Duration(time.Second)},
			{Resource: "c", Limit: 10, WarmUp: Duration(10 * time.Second)},
			{Resource: "d", Limit: 10, RefResource: "a"},
			{Resource: "e", Limit: 1000, Cluster: true, Lease: 20},
		},
		Breakers: []BreakerRule{
			{Resource: "a", Strategy: SREBreaker, K: 1.5, Protection: &one, BlockPolicy: "ignore_blocks"},
			{Resource: "a", Strategy: SlowRatioBreaker, Threshold: 0.2, MaxRT: Duration(time.Second), Probes: 3},
		},
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDurationsReadAsText(t *testing.T) {
	var r Rules
	err := json.Unmarshal([]byte(`{"flow":[{"resource":"a","limit":1,"interval":"500ms","max_wait":"1m30s"}]}`), &r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Flow[0].Interval != Duration(500*time.Millisecond) || r.Flow[0].MaxWait != Duration(90*time.Second) {
		t.Fatalf("rules = %+v", r)
	}
	for _, bad := range []string{`{"flow":[{"interval":500}]}`, `{"flow":[{"interval":"5 parsecs"}]}`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil || !strings.Contains(err.Error(), "duration") {
			t.Errorf("%s: %v, want an error about the duration", bad, err)
		}
	}
	b, _ := json.Marshal(FlowRule{Resource: "a", Interval: Duration(time.Second)})
	if !strings.Contains(string(b), `"interval":"1s"`) {
		t.Fatalf("marshalled %s", b)
	}
}

// Every problem a rule's settings make together names the field to fix, so
// that a rules file can put it on that field's line.
func TestProblemsOfSettingsTogetherNameTheirField(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		field string
	}{
		{Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, RefResource: "b", Interval: Duration(time.Minute)}}}, "interval"},
		{Rules{Flow: []FlowRule{{Resource: "a", Limit: 1, Buckets: 7}}}, "interval"},
		{Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker, Interval: Duration(time.Second), Buckets: 3}}}, "interval"},
		{Rules{Breakers: []BreakerRule{{Resource: "a", Strategy: SREBreaker, Buckets: 1 << 20}}}, "buckets"},
	} {
		var re *RulesError
		if err := tc.rules.Validate(); !errors.As(err, &re) || len(re.Problems) != 1 || re.Problems[0].Field != tc.field {
			t.Errorf("Validate(%+v) = %v, want one problem with field %q", tc.rules, err, tc.field)
		}
	}
}
