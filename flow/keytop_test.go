package flow

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// fullSortTop is topAt as it was: every shown key looked up by its cut,
// valid form, added up, all of them sorted, the first n kept.
func fullSortTop(q *KeyedQPS, now int64, n int, byBlocked bool) []keyStat {
	at := map[string]int{}
	var all []keyStat
	for i := range q.shards {
		s := &q.shards[i]
		s.mu.Lock()
		for e := range s.hot {
			st := s.stat(int32(e), now)
			hk := &s.hot[e]
			if st.Blocked == 0 && (hk.pin == nil && 2*st.Allowed <= s.cfg.wins[0].limit || st.Allowed == 0) {
				continue
			}
			st.Key = strings.ToValidUTF8(st.Key, "\uFFFD")
			if j, ok := at[st.Key]; ok {
				all[j].Allowed += st.Allowed
				all[j].Blocked += st.Blocked
				continue
			}
			at[st.Key] = len(all)
			all = append(all, st)
		}
		s.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b keyStat) int {
		x, y := a.Allowed, b.Allowed
		if byBlocked {
			x, y = a.Blocked, b.Blocked
		}
		return cmp.Or(cmp.Compare(y, x), strings.Compare(a.Key, b.Key))
	})
	return all[:min(max(n, 0), len(all))]
}

// TestTopAtIsTheFirstNOfAFullSort drives a per-key limiter with random
// keys (short ones, ones past 64 bytes that share their first 64, ones not
// valid UTF-8 and a valid one they then read as) and holds topAt, which
// selects, to the full sort it replaced, for every n and both orders.
func TestTopAtIsTheFirstNOfAFullSort(t *testing.T) {
	for _, odd := range []bool{false, true} {
		t.Run(fmt.Sprint("odd keys=", odd), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			c := clock.NewManual(0)
			q := mustKeyed(t, c, KeyWindow{Limit: 8, Interval: time.Second})
			keys := make([]string, 1500)
			for i := range keys {
				keys[i] = fmt.Sprint("user-", i)
			}
			if odd {
				long := strings.Repeat("k", 64)
				keys = append(keys, long, long+"a", long+"b", "a\xff", "a\xfe", "a\uFFFD")
			}
			for round := range 20 {
				for range 6000 {
					c.Advance(time.Duration(rng.IntN(int(200 * time.Microsecond))))
					q.AllowAt(c.Now(), keys[rng.IntN(len(keys))])
				}
				for _, n := range []int{-1, 0, 1, 3, 10, 100, 1 << 20} {
					for _, byBlocked := range []bool{false, true} {
						got, want := q.topAt(c.Now(), n, byBlocked), fullSortTop(q, c.Now(), n, byBlocked)
						if !slices.Equal(got, want) {
							t.Fatalf("round %d: topAt(%d, byBlocked %v) = %d keys %v..., want %d keys %v...",
								round, n, byBlocked, len(got), got[:min(3, len(got))], len(want), want[:min(3, len(want))])
						}
					}
				}
				if all := fullSortTop(q, c.Now(), 1<<20, false); round == 19 && len(all) < 100 {
					t.Errorf("only %d keys shown: the test compares few", len(all))
				}
			}
		})
	}
}
