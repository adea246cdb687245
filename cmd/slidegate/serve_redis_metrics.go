package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidegate/slidegate/redisflow"
)

// redisCollector exposes the health of slidegate serve's Redis (--redis),
// read from its cluster at scrape time: whether Redis decides, and the
// round trips, failures and fallback decisions so far.
type redisCollector struct {
	c                                 *redisflow.Cluster
	healthy, misconfigured, instances *prometheus.Desc
	roundTrips, failures, fallbacks   *prometheus.Desc
	scriptLoads, permanentFailures    *prometheus.Desc
}

func newRedisCollector(c *redisflow.Cluster) *redisCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("slidegate_ratelimit_redis_"+name, help, nil, nil)
	}
	return &redisCollector{
		c: c,
		healthy: desc("healthy",
			"1 while Redis decides, 0 while it is down (or refuses the commands) and each instance's fallback decides alone."),
		misconfigured: desc("misconfigured",
			"1 while Redis answers with an error that retrying will not fix (a wrong password, a missing permission or command: see the logs), 0 otherwise."),
		instances: desc("instances",
			"Instances sharing the limits, counted through the heartbeat key (1 until counted)."),
		roundTrips: desc("round_trips_total",
			"Decisions taken to Redis, answered or not."),
		failures: desc("failures_total",
			"Calls to Redis that failed or timed out: decisions, heartbeats and probes."),
		fallbacks: desc("fallbacks_total",
			"Decisions made by the fallback, in the process, while Redis was down."),
		scriptLoads: desc("script_loads_total",
			"Times a script had to be loaded into Redis (a new or restarted Redis, or its scripts flushed)."),
		permanentFailures: desc("permanent_failures_total",
			"Calls to Redis answered with an error that retrying will not fix."),
	}
}

func (c *redisCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.healthy, c.misconfigured, c.instances, c.roundTrips, c.failures, c.fallbacks, c.scriptLoads, c.permanentFailures} {
		ch <- d
	}
}

func (c *redisCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.c.Stats()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.healthy, flag01(s.Healthy))
	gauge(c.misconfigured, flag01(s.Err != nil))
	gauge(c.instances, float64(s.Instances))
	counter(c.roundTrips, s.RoundTrips)
	counter(c.failures, s.Failures)
	counter(c.fallbacks, s.Fallbacks)
	counter(c.scriptLoads, s.ScriptLoads)
	counter(c.permanentFailures, s.PermanentFailures)
}

// flag01 is 1 for true, 0 for false.
func flag01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
