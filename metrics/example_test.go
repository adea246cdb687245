package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/metrics"
)

func ExampleNewCollector() {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(0))) // a manual clock, for a stable output
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 2}}})

	// One line; with the default registry, prometheus.MustRegister(metrics.NewCollector(g)),
	// served by promhttp.Handler().
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(g))

	for range 3 { // two pass, the third is over the limit of 2 a second
		// A route the service serves: inbound (httpguard.Handler marks its
		// requests so).
		_ = g.Do(context.Background(), "GET /orders", func() error { return nil }, slidegate.WithInbound())
	}

	// What Prometheus would scrape, some lines of it.
	mfs, _ := reg.Gather()
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		for _, prefix := range []string{
			"slidegate_requests_allowed_total",
			`slidegate_requests_blocked_total{direction="inbound",reason="rate_limited"`,
			"slidegate_response_time_seconds_count",
			"slidegate_flow_rule_limit",
		} {
			if strings.HasPrefix(line, prefix) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// slidegate_flow_rule_limit{resource="GET /orders",rule="qps",type="qps"} 2
	// slidegate_requests_allowed_total{direction="inbound",resource="GET /orders"} 2
	// slidegate_requests_blocked_total{direction="inbound",reason="rate_limited",resource="GET /orders"} 1
	// slidegate_response_time_seconds_count{direction="inbound",resource="GET /orders"} 2
}

func ExampleWithTopKeys() {
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(0)))
	if err != nil {
		panic(err)
	}
	// Each user at most 5 requests a second; bob, a partner, 10. A key is
	// tracked once it uses over half its limit, or from its first request
	// if it has an override: mallory, watched, has one of the same 5.
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 5, PerKey: true,
		Overrides: map[string]int64{"bob": 10, "mallory": 5}}}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(g, metrics.WithTopKeys(3)))

	send := func(user string, n int) {
		for range n {
			_ = g.Do(context.Background(), "GET /orders", func() error { return nil }, slidegate.WithKey(user))
		}
	}
	send("alice", 1)    // quiet: not tracked
	send("bob", 4)      // within his limit
	send("mallory", 20) // over it: 5 allowed, 15 blocked

	// What Prometheus would scrape (in the registry's order: by labels).
	mfs, _ := reg.Gather()
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "slidegate_top_key_") {
			fmt.Println(line)
		}
	}
	// Output:
	// slidegate_top_key_requests_allowed{key="bob",resource="GET /orders"} 4
	// slidegate_top_key_requests_allowed{key="mallory",resource="GET /orders"} 5
	// slidegate_top_key_requests_blocked{key="mallory",resource="GET /orders"} 15
}

func ExampleWithBuckets() {
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(g, metrics.WithBuckets(10*time.Millisecond, 100*time.Millisecond)))

	// Three calls out, of 4, 40 and 400 ms.
	for _, d := range []time.Duration{4 * time.Millisecond, 40 * time.Millisecond, 400 * time.Millisecond} {
		e, _ := g.EnterAt(context.Background(), clk.Now(), "GET inventory.internal")
		e.ExitAt(clk.Now()+int64(d), nil)
	}

	// The text format shows the classic buckets; the protobuf format
	// carries native buckets too.
	mfs, _ := reg.Gather()
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		_ = enc.Encode(mf)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "slidegate_request_duration_seconds_bucket") ||
			strings.HasPrefix(line, "slidegate_request_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// slidegate_request_duration_seconds_bucket{direction="outbound",resource="GET inventory.internal",le="0.01"} 1
	// slidegate_request_duration_seconds_bucket{direction="outbound",resource="GET inventory.internal",le="0.1"} 2
	// slidegate_request_duration_seconds_bucket{direction="outbound",resource="GET inventory.internal",le="+Inf"} 3
	// slidegate_request_duration_seconds_count{direction="outbound",resource="GET inventory.internal"} 3
}
