package metrics_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/metrics"
)

// TestKeyFamiliesAreTheFirstOfEveryKeySorted drives two resources whose
// names read the same as label values, and a third, with random keys
// (ones past 64 bytes, ones not valid UTF-8), and holds the key families
// to every key of Guard.TopKeys made a label value, added up, all sorted
// and the first n kept: what the Collector sent before it selected.
func TestKeyFamiliesAreTheFirstOfEveryKeySorted(t *testing.T) {
	t.Run("plain keys", func(t *testing.T) { keyFamiliesAgainstFullSort(t, false) })
	t.Run("odd keys", func(t *testing.T) { keyFamiliesAgainstFullSort(t, true) })
}

// keyFamiliesAgainstFullSort is TestKeyFamiliesAreTheFirstOfEveryKeySorted,
// with the keys cut or not valid UTF-8 if withOdd.
func keyFamiliesAgainstFullSort(t *testing.T, withOdd bool) {
	clk := clock.NewManual(start)
	g := newGuard(t, slidegate.WithClock(clk))
	resources := []string{"a\xff", "a\xfe", "GET /api"}
	var rules []slidegate.FlowRule
	for _, r := range resources {
		rules = append(rules, slidegate.FlowRule{Resource: r, Limit: 6, PerKey: true})
	}
	if err := g.SetRules(slidegate.Rules{Flow: rules}); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 600)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	// Keys that the guard cuts to 64 bytes and makes valid UTF-8 apart,
	// and that read the same as label values, cut again: U+FFFD takes 3
	// bytes where the invalid byte took one.
	long := strings.Repeat("\xffa", 31)
	odd := []string{long + "\xffa", long + "\xffb", strings.Repeat("k", 70) + "1", strings.Repeat("k", 70) + "2", "k\xff", "k\uFFFD"}
	if !withOdd {
		odd = nil
	}
	keys = append(keys, odd...)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 10, 1000} {
		c := metrics.NewCollector(g, metrics.WithTopKeys(n))
		for round := range 5 {
			for range 3000 {
				clk.Advance(time.Duration(rng.IntN(int(300 * time.Microsecond))))
				_ = g.Do(context.Background(), resources[rng.IntN(len(resources))], func() error { return nil },
					slidegate.WithKey(keys[rng.IntN(len(keys))]))
			}
			for _, k := range odd { // busy enough to be tracked
				for _, r := range resources {
					for range 4 {
						_ = g.Do(context.Background(), r, func() error { return nil }, slidegate.WithKey(k))
					}
				}
			}
			got := keySeries(t, c)
			want := fullSortKeySeries(g, resources, n)
			if !slices.Equal(got, want) {
				t.Fatalf("n %d round %d: %d series %v..., want %d %v...", n, round, len(got), got[:min(4, len(got))], len(want), want[:min(4, len(want))])
			}
			if round == 4 && len(want) < 2*min(n, 10) {
				t.Errorf("n %d: only %d series: the test compares few", n, len(want))
			}
		}
	}
}

// keySeries returns the key families' series that c collects, each as
// family resource key value, sorted.
func keySeries(t *testing.T, c prometheus.Collector) []string {
	ch := make(chan prometheus.Metric, 1<<14)
	c.Collect(ch)
	close(ch)
	var out []string
	for m := range ch {
		name := m.Desc().String()
		if !strings.Contains(name, "top_key_requests") {
			continue
		}
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		l := labelsOf(&d)
		fam := "allowed"
		if strings.Contains(name, "top_key_requests_blocked") {
			fam = "blocked"
		}
		out = append(out, fmt.Sprintf("%s %q %q %v", fam, l["resource"], l["key"], d.GetGauge().GetValue()))
	}
	slices.Sort(out)
	return out
}

// fullSortKeySeries is what the Collector sent before it selected: every
// key of each resource (TopKeys with no bound), made a label value, those
// that then read the same added up, all sorted, the first n with a count
// above zero.
func fullSortKeySeries(g *slidegate.Guard, resources []string, n int) []string {
	byLabel := map[string][]slidegate.KeyStat{}
	for _, r := range resources {
		byLabel[exported.Value(r)] = append(byLabel[exported.Value(r)], g.TopKeys(r, math.MaxInt, false)...)
	}
	var out []string
	for label, ks := range byLabel {
		merged := map[string]slidegate.KeyStat{}
		for _, k := range ks {
			k.Key = exported.Value(k.Key[:min(len(k.Key), 64)])
			m := merged[k.Key]
			m.Key = k.Key
			m.Allowed += k.Allowed
			m.Blocked += k.Blocked
			merged[k.Key] = m
		}
		all := slices.Collect(func(yield func(slidegate.KeyStat) bool) {
			for _, k := range merged {
				if !yield(k) {
					return
				}
			}
		})
		for _, fam := range []string{"allowed", "blocked"} {
			value := func(k slidegate.KeyStat) int64 { return k.Allowed }
			if fam == "blocked" {
				value = func(k slidegate.KeyStat) int64 { return k.Blocked }
			}
			slices.SortFunc(all, func(a, b slidegate.KeyStat) int {
				return cmp.Or(cmp.Compare(value(b), value(a)), strings.Compare(a.Key, b.Key))
			})
			for _, k := range all[:min(n, len(all))] {
				if value(k) <= 0 {
					break
				}
				out = append(out, fmt.Sprintf("%s %q %q %v", fam, label, k.Key, float64(value(k))))
			}
		}
	}
	slices.Sort(out)
	return out
}
