package otelguard_test

import (
	"errors"
	"testing"

	"github.com/slidegate/slidegate"
)

// cluster is a Cluster that reports the health it is given, and serves no
// rule.
type cluster struct{ health slidegate.ClusterHealth }

func (c *cluster) Limiter(slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	return nil, errors.New("no cluster rules here")
}

func (c *cluster) Health() slidegate.ClusterHealth { return c.health }

// The cluster instruments say what the guard's cluster reports of its
// health, each collection afresh.
func TestClusterHealth(t *testing.T) {
	c := &cluster{health: slidegate.ClusterHealth{Healthy: true, Failures: 3, Fallbacks: 7}}
	h := newHarness(t, slidegate.Rules{}, slidegate.WithCluster(c))
	ms := h.collect(t)
	for name, want := range map[string]int64{"slidegate.cluster.healthy": 1, "slidegate.cluster.failures": 3, "slidegate.cluster.fallbacks": 7} {
		if got := value(t, ms, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	c.health = slidegate.ClusterHealth{Healthy: false, Failures: 1 << 63, Fallbacks: 8}
	ms = h.collect(t)
	for name, want := range map[string]int64{"slidegate.cluster.healthy": 0, "slidegate.cluster.failures": 1<<63 - 1, "slidegate.cluster.fallbacks": 8} {
		if got := value(t, ms, name); got != want {
			t.Errorf("unhealthy: %s = %d, want %d", name, got, want)
		}
	}
}
