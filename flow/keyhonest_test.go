package flow

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/clock"
)

// A pacedKey asks at an even pace: one request every period, from start.
type pacedKey struct {
	key    string
	period int64
	next   int64
	asked  int
	refuse int
}

// askUntil asks for the key at each of its times before end, recording
// what was allowed.
func (p *pacedKey) askUntil(t *testing.T, q *KeyedQPS, end int64, got admissions) {
	t.Helper()
	for ; p.next < end; p.next += p.period {
		p.asked++
		if d, _ := q.AllowNAt(p.next, p.key, 1); d.Allowed {
			got.add(p.key, p.next, 1)
		} else {
			p.refuse++
		}
	}
}

// An attacker sends keys of one shard, each over its limit (120%), in
// batches of a twentieth of the limit, so that they fill and churn the
// entries of the shard of the key it wants to evict.
type attacker struct {
	keys  []string
	batch int64
	every int64 // time between two batches of one key
	next  int64
}

func newAttacker(q *KeyedQPS, shard uint64, keys int, w KeyWindow, share float64) *attacker {
	batch := max(1, w.Limit/20)
	rate := share * float64(w.Limit) / float64(w.Interval) // requests per ns
	return &attacker{
		keys:  keysInShard(q, shard, keys, "attacker-"),
		batch: batch,
		every: int64(float64(batch) / rate),
	}
}

// sendUntil sends every key's batches due before end, spread evenly over
// the time between two batches, and records what was allowed.
func (a *attacker) sendUntil(q *KeyedQPS, end int64, got admissions) {
	step := a.every / int64(len(a.keys))
	for ; a.next < end; a.next += a.every {
		for i, key := range a.keys {
			at := a.next + int64(i)*step
			if d, _ := q.AllowNAt(at, key, a.batch); d.Allowed {
				got.add(key, at, a.batch)
			}
		}
	}
}

// TestASteadyKeyBelowItsLimitIsNeverRefused: a key that asks at an even
// pace, 90% or 95% of its limit, is never refused, from its first request
// on, for intervals of a second, a minute and an hour; alone, and while an
// attacker sends keys of its shard over their limits, more of them than the
// shard has entries, to evict it. No key gets more than its limit in any
// interval.
func TestASteadyKeyBelowItsLimitIsNeverRefused(t *testing.T) {
	for _, tc := range []struct {
		w     KeyWindow
		share float64
	}{
		{KeyWindow{Limit: 10, Interval: time.Second}, 0.95},
		{KeyWindow{Limit: 100, Interval: time.Second}, 0.95},
		{KeyWindow{Limit: 600, Interval: time.Minute}, 0.95},
		{KeyWindow{Limit: 1000, Interval: time.Hour}, 0.90},
		{KeyWindow{Limit: 1000, Interval: time.Hour}, 0.95},
	} {
		for _, attack := range []int{0, 3000} {
			name := fmt.Sprintf("%d per %v at %.0f%%, %d attacker keys", tc.w.Limit, tc.w.Interval, 100*tc.share, attack)
			t.Run(name, func(t *testing.T) {
				if attack > 0 && testing.Short() {
					t.Skip("the attacker sends a million requests")
				}
				// A budget of 256 KiB holds about a thousand entries in
				// one shard: fewer than the attacker's keys.
				mem, _ := NewKeyMemory(256 << 10)
				q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{tc.w}, Clock: clock.NewManual(0), KeyMemory: mem})
				if err != nil {
					t.Fatal(err)
				}
				key := "steady"
				iv := int64(tc.w.Interval)
				p := &pacedKey{key: key, period: int64(float64(iv) / (tc.share * float64(tc.w.Limit))), next: iv/3 + 12345}
				var a *attacker
				if attack > 0 {
					// From the key's second interval on.
					a = newAttacker(q, q.hash(key)>>shardShift, attack, tc.w, 1.2)
					a.next = iv + iv/3
				}
				got := admissions{}
				// A step of a twentieth of the interval, the attacker first.
				for end := int64(0); end < 5*iv; end += iv / 20 {
					if a != nil {
						a.sendUntil(q, end, got)
					}
					p.askUntil(t, q, end, got)
				}
				got.check(t, tc.w)
				if p.refuse > 0 {
					t.Errorf("the steady key was refused %d of %d", p.refuse, p.asked)
				}
				if a != nil {
					s := q.shard(q.hash(key))
					cold := 0
					for _, k := range a.keys {
						if _, ok := s.index.find(q.hash(k), s.hot); !ok {
							cold++
						}
					}
					if cold < attack/2 {
						t.Errorf("%d of the attacker's %d keys without entries: the table was not full, nothing was evicted", cold, attack)
					}
				}
			})
		}
	}
}

// churn sends a thousand victim keys at 80% of their limit of 10 per
// second and attacker keys at 120%, each attacker key one request every
// twelfth of a second, the keys in turn, from interval attackFrom on, for
// the given intervals; it returns the victims' requests asked and refused
// per interval, and checks that no key got over its limit.
func churn(t *testing.T, q *KeyedQPS, attackers, attackFrom, intervals int) (asked, refused []int) {
	asked, refused = make([]int, intervals), make([]int, intervals)
	w := KeyWindow{Limit: 10, Interval: time.Second}
	iv := int64(w.Interval)
	vs := make([]pacedKey, 1000)
	for i := range vs {
		period := int64(float64(iv) / (0.8 * float64(w.Limit)))
		vs[i] = pacedKey{key: "victim-" + strconv.Itoa(i), period: period, next: int64(i) * period / int64(len(vs))}
	}
	akeys := make([]string, attackers)
	for i := range akeys {
		akeys[i] = "attacker-" + strconv.Itoa(i)
	}
	aPeriod := iv / 12
	step := aPeriod / int64(attackers)
	got := admissions{}
	for sec := range intervals {
		for slot := range int64(12) {
			start := int64(sec)*iv + slot*aPeriod
			for i, key := range akeys {
				if sec < attackFrom {
					break
				}
				at := start + int64(i)*step
				if d, _ := q.AllowNAt(at, key, 1); d.Allowed {
					got.add(key, at, 1)
				}
			}
			for i := range vs {
				a, r := vs[i].asked, vs[i].refuse
				vs[i].askUntil(t, q, start+aPeriod, got)
				asked[sec] += vs[i].asked - a
				refused[sec] += vs[i].refuse - r
			}
		}
	}
	got.check(t, w)
	for sec := range asked {
		t.Logf("interval %d: victims refused %d of %d", sec, refused[sec], asked[sec])
	}
	return asked, refused
}

// TestVictimsWithinTheirLimitKeepTheirWindowsWhileAttackersChurnTheTable:
// a thousand keys at 80% of their limit, with their entries (two intervals
// to take them: those that find none free at their first request take one
// past half their limit, and may be refused once for their seed), are
// refused at most 1% of their requests while a hundred thousand attacker
// keys, each at 120% of its limit, come and go through the entries (a
// budget of 16 MiB holds some 30,000 of them); no key gets over its limit.
func TestVictimsWithinTheirLimitKeepTheirWindowsWhileAttackersChurnTheTable(t *testing.T) {
	attackers := 100_000
	if testing.Short() || raceEnabled {
		attackers = 25_000
	}
	mem, _ := NewKeyMemory(16 << 20 * int64(attackers) / 100_000)
	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 10, Interval: time.Second}}, Clock: clock.NewManual(0), KeyMemory: mem})
	if err != nil {
		t.Fatal(err)
	}
	asked, refused := churn(t, q, attackers, 2, 6)
	var all, allRefused int
	for sec := 2; sec < len(asked); sec++ {
		all += asked[sec]
		allRefused += refused[sec]
	}
	if rate := float64(allRefused) / float64(all); rate > 0.01 {
		t.Errorf("victims at 80%% of their limit refused %d of %d (%.2f%%), want at most 1%%", allRefused, all, 100*rate)
	}
	hot := 0
	for i := range q.shards {
		hot += len(q.shards[i].hot)
	}
	if hot >= attackers {
		t.Errorf("%d entries for %d attacker keys: they did not have to take one another's", hot, attackers)
	}
}

// TestVictimsThatArriveWithTheAttackersAreRefusedOnlyAtFirst: victims that
// come at the same instant as more attackers than the budget holds entries
// for cannot be told from them until the attackers go over their limits;
// those that find no entry are counted in the sketch, and take the entries
// of attackers refused in theirs, seeded with what the sketch counted,
// which may refuse them for an interval more (docs/keyed.md gives the
// figures). Once they have entries they keep them: their refusals fall,
// those of their eleventh and twelfth intervals a quarter of their third
// and fourth's at most, and under 10% of what they ask.
func TestVictimsThatArriveWithTheAttackersAreRefusedOnlyAtFirst(t *testing.T) {
	attackers := 100_000
	if testing.Short() || raceEnabled {
		attackers = 25_000
	}
	mem, _ := NewKeyMemory(16 << 20 * int64(attackers) / 100_000)
	q, err := NewKeyedQPS(KeyedQPSSettings{Windows: []KeyWindow{{Limit: 10, Interval: time.Second}}, Clock: clock.NewManual(0), KeyMemory: mem})
	if err != nil {
		t.Fatal(err)
	}
	asked, refused := churn(t, q, attackers, 0, 12)
	early, late, of := refused[2]+refused[3], refused[10]+refused[11], asked[10]+asked[11]
	if late > early/4 || late > of/10 {
		t.Errorf("victims refused %d of %d in their eleventh and twelfth intervals, %d in their third and fourth", late, of, early)
	}
}

// TestKeysFarBelowAHighLimitKeepTheirEntries: keys that ask a tiny share
// of a high limit are not idle: newcomers do not take their entries (each
// decision would evict one).
func TestKeysFarBelowAHighLimitKeepTheirEntries(t *testing.T) {
	q := mustKeyed(t, clock.NewManual(0), KeyWindow{Limit: 1 << 30, Interval: time.Second})
	for i := range 20000 {
		q.AllowNAt(int64(i), "k"+strconv.Itoa(i), 1)
	}
	held := map[uint64]bool{}
	for i := range q.shards {
		for _, hk := range q.shards[i].hot {
			held[hk.hash] = true
		}
	}
	for i := range 20000 {
		q.AllowNAt(20000+int64(i), "later"+strconv.Itoa(i), 1)
	}
	lost := 0
	for i := range q.shards {
		s := &q.shards[i]
		for h := range held {
			if h>>shardShift == uint64(i) {
				if _, ok := s.index.find(h, s.hot); !ok {
					lost++
				}
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of the %d keys with entries lost them to newcomers", lost, len(held))
	}
}

// TestAFullTableOfKeysFarBelowAHighLimitIsSearchedRarely: when no entry
// can be taken, newcomers far below a high limit (whose share of it rounds
// to nothing) are spared the search, as others are.
func TestAFullTableOfKeysFarBelowAHighLimitIsSearchedRarely(t *testing.T) {
	q := mustKeyed(t, clock.NewManual(0), KeyWindow{Limit: 1 << 30, Interval: time.Second})
	for i := range 200_000 { // entries full, of busy keys
		q.AllowNAt(int64(i), "k"+strconv.Itoa(i%20000), 1)
	}
	s := &q.shards[0]
	sweeps := s.cursor
	n := 0
	for i := 0; n < 20000; i++ {
		if key := "new" + strconv.Itoa(i); q.hash(key)>>shardShift == 0 {
			q.AllowNAt(300_000+int64(n), key, 1)
			n++
		}
	}
	if looked := (s.cursor - sweeps) / victimLook; looked > n/10 {
		t.Fatalf("%d newcomers searched the entries %d times", n, looked)
	}
}
