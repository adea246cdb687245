package slidegate

import (
	"github.com/slidegate/slidegate/internal/flowstate"
	"github.com/slidegate/slidegate/internal/hooks"
)

func init() {
	hooks.Resources = func(g any, f func(*hooks.Resource)) { g.(*Guard).eachResource(f) }
	hooks.Keys = func(g any, name string) []flowstate.KeyStat {
		gd := g.(*Guard)
		if q := gd.keyed(name); q != nil {
			return flowstate.Keys(q, gd.clock.Now())
		}
		return nil
	}
}

// eachResource calls f with the totals of each resource Resources
// returns, in no order, reading each resource once: no window of the last
// seconds, no quantile, no sort. *r is reused from one call to the next.
func (g *Guard) eachResource(f func(r *hooks.Resource)) {
	var r hooks.Resource
	read := func(res *resource) {
		t, n, inbound := res.totals()
		r = hooks.Resource{Name: res.name, Inbound: inbound, InFlight: n, Totals: hooks.Totals(t), Latency: res.lat}
	}
	g.resources.m.Range(func(_, v any) bool {
		read(v.(*resource))
		f(&r)
		return true
	})
	// As ResourcesAt: OtherResource once it has counted anything.
	read(g.resources.other)
	if t := Totals(r.Totals); t.Allowed+t.Blocked()+r.InFlight > 0 {
		f(&r)
	}
}
