package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate/envoyrls"
)

// serveCollector exposes what slidegate serve decided, read at scrape
// time: hits by domain, rule and outcome, those near the limit, requests
// by answer, and the windows' memory. Its series are as many as the rules in force and the
// values counted apart (at most 1,000), whatever clients send.
type serveCollector struct {
	svc                 *envoyrls.Service
	hits, near          *prometheus.Desc
	requests, loads     *prometheus.Desc
	memory, memoryLimit *prometheus.Desc
}

func newServeCollector(svc *envoyrls.Service) *serveCollector {
	return &serveCollector{
		svc: svc,
		hits: prometheus.NewDesc("slidegate_ratelimit_hits_total",
			"Hits asked of each rule (or value counted apart), by outcome: within_limit, over_limit (refused), shadow_mode (over the limit of a rule in shadow mode, allowed).",
			[]string{"domain", "rule", "outcome"}, nil),
		near: prometheus.NewDesc("slidegate_ratelimit_near_limit_total",
			"Hits within the limit of each rule (or value counted apart) that took their key past 80 % of it, as envoyproxy/ratelimit's near_limit; a part of the within_limit hits.",
			[]string{"domain", "rule"}, nil),
		requests: prometheus.NewDesc("slidegate_ratelimit_requests_total",
			"ShouldRateLimit requests by answer: OK, OVER_LIMIT, or invalid (refused with a status).",
			[]string{"code"}, nil),
		loads: prometheus.NewDesc("slidegate_ratelimit_config_loads_total",
			"Config directories read, by result: loaded (put in force) or refused (for a problem; the config in force stays).",
			[]string{"result"}, nil),
		memory: prometheus.NewDesc("slidegate_ratelimit_key_memory_bytes",
			"Heap the per-key windows hold.", nil, nil),
		memoryLimit: prometheus.NewDesc("slidegate_ratelimit_key_memory_limit_bytes",
			"Heap the per-key windows may hold (--key-memory).", nil, nil),
	}
}

func (c *serveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hits
	ch <- c.near
	ch <- c.requests
	ch <- c.loads
	ch <- c.memory
	ch <- c.memoryLimit
}

func (c *serveCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Stats()
	for _, r := range st.Rules {
		for _, o := range []struct {
			outcome string
			n       uint64
		}{{"within_limit", r.WithinLimit}, {"over_limit", r.OverLimit}, {"shadow_mode", r.ShadowMode}} {
			ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(o.n), r.Domain, r.Key, o.outcome)
		}
		ch <- prometheus.MustNewConstMetric(c.near, prometheus.CounterValue, float64(r.NearLimit), r.Domain, r.Key)
	}
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(st.Requests), "OK")
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(st.OverLimit), "OVER_LIMIT")
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(st.Invalid), "invalid")
	ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(st.ConfigLoads), "loaded")
	ch <- prometheus.MustNewConstMetric(c.loads, prometheus.CounterValue, float64(st.ConfigRefused), "refused")
	ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(st.KeyMemory))
	ch <- prometheus.MustNewConstMetric(c.memoryLimit, prometheus.GaugeValue, float64(st.KeyMemoryLimit))
}
