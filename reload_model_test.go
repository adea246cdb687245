package slidegate

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestNoReloadLetsAKeyOverItsLimit drives random requests and random
// reloads on a manual clock, and checks every admission against a
// brute-force model of each rule's promise.
//
// Seven rules are watched: per-key QPS (two windows of one resource, a
// second and three, decided together), concurrency and throttle, and the
// three without keys. Reloads add, remove and change overrides; change
// limits; reorder, rename and shadow the rules; remove and restore them
// (a per-key QPS window added to or removed from those in force); and add
// or remove rules of other resources. The model
// holds each rule to this: a QPS rule or a throttle (which here never makes
// a request wait) admits a key at most the largest limit it had for the key
// in any interval of its length it was enforced throughout; a concurrency
// rule admits a key only while the key's requests admitted since the rule
// was last enforced, not yet exited, stay within the key's limit.
func TestNoReloadLetsAKeyOverItsLimit(t *testing.T) {
	for seed := range uint64(48) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkKeyReloads(t, seed) })
	}
}

// A watched is one of the rules the model checks.
type watched struct {
	resource string
	typ      FlowType
	perKey   bool
	interval time.Duration // 0: a second
	// What the reloads change.
	present, shadow bool
	name            string
	limit           int64
	overrides       map[string]int64
}

// limits is what a watched rule enforces: nil while it is absent or in
// shadow.
type limits struct {
	limit     int64
	overrides map[string]int64
}

func (l *limits) of(key string) int64 {
	if n, ok := l.overrides[key]; ok {
		return n
	}
	return l.limit
}

func (w *watched) rule() FlowRule {
	f := FlowRule{Resource: w.resource, Type: w.typ, Limit: w.limit, PerKey: w.perKey, Name: w.name, Shadow: w.shadow, Interval: Duration(w.interval)}
	if w.perKey && len(w.overrides) > 0 {
		f.Overrides = maps.Clone(w.overrides)
	}
	return f
}

// A modelAdmission is a request the guard let through.
type modelAdmission struct {
	at, seq int
	key     string
	exited  bool
}

type modelLoad struct {
	at  int64
	seq int
	in  []*limits // by watched rule
}

var modelKeys = []string{"k0", "k1", "k2"}

func checkKeyReloads(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	ws := []*watched{
		{resource: "qk", typ: QPSRule, perKey: true},
		{resource: "ck", typ: ConcurrencyRule, perKey: true},
		{resource: "tk", typ: ThrottleRule, perKey: true},
		{resource: "q", typ: QPSRule},
		{resource: "c", typ: ConcurrencyRule},
		{resource: "t", typ: ThrottleRule},
		{resource: "qk", typ: QPSRule, perKey: true, interval: 3 * time.Second},
	}
	limit := func(w *watched) int64 {
		if w.typ == ThrottleRule {
			return 1 + rng.Int64N(3) // a throttle paces at least 1 a second
		}
		if w.interval > 0 {
			return rng.Int64N(8)
		}
		return rng.Int64N(4)
	}
	for _, w := range ws {
		w.present, w.limit = true, limit(w)
	}
	var unrelated []FlowRule
	order := []int{0, 1, 2, 3, 4, 5, 6} // watched rules by index, unrelated ones from 100
	globalShadow := false
	rules := func() Rules {
		var r Rules
		for _, i := range order {
			switch {
			case i >= 100:
				r.Flow = append(r.Flow, unrelated[i-100])
			case ws[i].present:
				r.Flow = append(r.Flow, ws[i].rule())
			}
		}
		r.Shadow = globalShadow
		return r
	}
	g, clk := newGuard(t, rules())
	var loads []modelLoad
	record := func(seq int) {
		l := modelLoad{at: clk.Now(), seq: seq, in: make([]*limits, len(ws))}
		for i, w := range ws {
			if w.present && !w.shadow && !globalShadow {
				l.in[i] = &limits{limit: w.limit, overrides: maps.Clone(w.overrides)}
			}
		}
		loads = append(loads, l)
	}
	record(0)
	admitted := make([][]*modelAdmission, len(ws))
	type heldEntry struct {
		e Entry
		a *modelAdmission
	}
	var held []heldEntry

	// check holds the admission a of watched rule i, made at time now, to
	// the model.
	check := func(i int, a *modelAdmission, now int64) {
		w := ws[i]
		key := a.key
		if !w.perKey {
			key = ""
		}
		same := func(b *modelAdmission) bool { return !w.perKey || b.key == a.key }
		if w.typ == ConcurrencyRule {
			// Enforced since which load?
			j := len(loads) - 1
			if loads[j].in[i] == nil {
				return
			}
			for j > 0 && loads[j-1].in[i] != nil {
				j--
			}
			since := loads[j].seq
			n := int64(0)
			for _, b := range admitted[i] {
				if b.seq > since && !b.exited && same(b) {
					n++
				}
			}
			if lim := loads[len(loads)-1].in[i].of(key); n > lim {
				t.Fatalf("step %d: %s: key %q holds %d places, limit %d", a.seq, w.resource, key, n, lim)
			}
			return
		}
		// The loads in force during (now-interval, now].
		interval := int64(time.Second)
		if w.interval > 0 {
			interval = int64(w.interval)
		}
		from := now - interval
		bound := int64(-1)
		for j := len(loads) - 1; j >= 0; j-- {
			l := loads[j]
			if l.in[i] == nil {
				return // not enforced throughout
			}
			bound = max(bound, l.in[i].of(key))
			if l.at <= from {
				break
			}
		}
		n := int64(0)
		for _, b := range admitted[i] {
			if int64(b.at) > from && same(b) {
				n++
			}
		}
		if n > bound {
			t.Fatalf("step %d: %s: key %q admitted %d times in the second up to %v, limits at most %d", a.seq, w.resource, key, n, time.Duration(now), bound)
		}
	}

	for seq := 1; seq <= 1500; seq++ {
		switch op := rng.IntN(100); {
		case op < 20:
			clk.Advance(time.Duration(rng.IntN(350)) * time.Millisecond)
		case op < 30:
			if len(held) > 0 {
				k := rng.IntN(len(held))
				held[k].e.Exit(nil)
				held[k].a.exited = true
				held = slices.Delete(held, k, k+1)
			}
		case op < 80:
			i := rng.IntN(len(ws))
			key := modelKeys[rng.IntN(len(modelKeys))]
			e, err := g.Enter(bg, ws[i].resource, WithKey(key))
			if err != nil {
				continue
			}
			now := clk.Now()
			a := &modelAdmission{at: int(now), seq: seq, key: key}
			for j, w := range ws { // every rule of the resource admitted it
				if w.resource == ws[i].resource {
					admitted[j] = append(admitted[j], a)
					check(j, a, now)
				}
			}
			if ws[i].typ == ConcurrencyRule {
				held = append(held, heldEntry{e, a})
			} else {
				e.Exit(nil)
			}
		default:
			w := ws[rng.IntN(len(ws))]
			switch rng.IntN(10) {
			case 0, 1: // an override added or changed
				if w.perKey {
					if w.overrides == nil {
						w.overrides = map[string]int64{}
					}
					w.overrides[modelKeys[rng.IntN(len(modelKeys))]] = rng.Int64N(4)
				}
			case 2: // an override removed
				for k := range w.overrides {
					delete(w.overrides, k)
					break
				}
			case 3:
				w.limit = limit(w)
			case 4:
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			case 5:
				w.name = []string{"", "one", "two"}[rng.IntN(3)]
				if w.interval > 0 { // names of its own beside the other qk rule's
					w.name = []string{"", "long", "longer"}[rng.IntN(3)]
				}
			case 6:
				if rng.IntN(4) == 0 {
					globalShadow = !globalShadow
				} else {
					// The per-key QPS rules of a resource are all in
					// shadow or none.
					shadow := !w.shadow
					for _, v := range ws {
						if v == w || v.resource == w.resource && v.perKey && v.typ == QPSRule && w.perKey && w.typ == QPSRule {
							v.shadow = shadow
						}
					}
				}
			case 7:
				w.present = !w.present
			case 8: // a rule of another resource added
				if len(unrelated) < 4 {
					u := []FlowRule{
						{Resource: "u", Limit: 5},
						{Resource: "u", Type: ConcurrencyRule, Limit: 2, PerKey: true, Overrides: map[string]int64{"k0": 1}},
						{Resource: "v", Type: ThrottleRule, Limit: 3, PerKey: true},
						{Resource: "v", Limit: 2, PerKey: true, Overrides: map[string]int64{"k1": 3}},
					}[rng.IntN(4)]
					unrelated = append(unrelated, u)
					order = slices.Insert(order, rng.IntN(len(order)+1), 100+len(unrelated)-1)
				}
			case 9: // the last one added removed
				if n := len(unrelated); n > 0 {
					unrelated = unrelated[:n-1]
					order = slices.DeleteFunc(order, func(i int) bool { return i == 100+n-1 })
				}
			}
			if err := g.SetRules(rules()); err != nil {
				t.Fatalf("step %d: %v", seq, err)
			}
			record(seq)
		}
	}
	for _, h := range held {
		h.e.Exit(nil)
	}
	for i, w := range ws {
		if len(admitted[i]) < 40 {
			t.Fatalf("%s: only %d admitted: the test did not reach the limits", w.resource, len(admitted[i]))
		}
	}
}
