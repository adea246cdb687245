package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/metrics"
)

// healthCluster is a cluster that reports the health it is given.
type healthCluster struct{ h slidegate.ClusterHealth }

func (c *healthCluster) Limiter(slidegate.FlowRule) (slidegate.ClusterLimiter, error) {
	return allowAll{}, nil
}
func (c *healthCluster) Health() slidegate.ClusterHealth { return c.h }

type allowAll struct{}

func (allowAll) AllowN(context.Context, int64) flow.Decision { return flow.Decision{Allowed: true} }

func TestClusterHealthIsExported(t *testing.T) {
	c := &healthCluster{h: slidegate.ClusterHealth{Healthy: true, Failures: 3, Fallbacks: 7}}
	s := newScraper(t, metrics.NewCollector(newGuard(t, slidegate.WithCluster(c))))
	f := s.scrape(t)
	for name, want := range map[string]float64{
		"slidegate_cluster_healthy": 1, "slidegate_cluster_misconfigured": 0,
		"slidegate_cluster_failures_total": 3, "slidegate_cluster_fallbacks_total": 7,
	} {
		if got := f.value(t, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	c.h = slidegate.ClusterHealth{Err: errors.New("WRONGPASS invalid username-password pair")}
	f = s.scrape(t)
	if f.value(t, "slidegate_cluster_healthy", nil) != 0 || f.value(t, "slidegate_cluster_misconfigured", nil) != 1 {
		t.Errorf("a misconfigured cluster reads healthy %v, misconfigured %v", f.value(t, "slidegate_cluster_healthy", nil), f.value(t, "slidegate_cluster_misconfigured", nil))
	}
	// A guard without a cluster exports no cluster families.
	f = newScraper(t, metrics.NewCollector(newGuard(t))).scrape(t)
	for _, name := range clusterFamilies {
		if f["slidegate_"+name] != nil {
			t.Errorf("a guard without a cluster exports %s", name)
		}
	}
}
