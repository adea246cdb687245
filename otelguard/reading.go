package otelguard

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/exported"
	"github.com/slidegate/slidegate/internal/hooks"
	"github.com/slidegate/slidegate/window"
)

// A row is one series' resource in a collection: a resource of the
// guard, or those whose names read the same as attribute values and share
// a direction, added up. Name is the attribute value.
type row struct {
	hooks.Resource
	more    []*window.Sketch // the response times of the others added up into it
	seconds float64          // with more: the response times' sums in seconds, added up
}

// sum returns the sum of the row's response times in seconds: of each
// resource's, added up, as the histograms of each were.
func (w *row) sum() float64 {
	if w.more == nil {
		return w.Totals.RT.Seconds()
	}
	return w.seconds
}

// A reading is what a reader of the guard (the instruments, a Producer)
// keeps from one collection to the next: each series' entry, made once
// from its key (its attribute sets), and the order of the names.
//
// A collection reads every resource once (hooks.Resources), in no order.
// The rows go out sorted by name, as Guard.Resources returns them: the
// SDK's cardinality limit keeps the first series it is told, so the order
// decides which fold into its overflow series. Sorting 4,096 names took
// more than the rest of a collection's reading; so each entry keeps its
// place, and while the guard keeps the same resources the rows are put in
// place by it, without comparing names.
//
// Entries are kept only for the resources of the last collection: the
// reading is never larger than the guard's resources.
type reading[E any] struct {
	rows    []row
	entries []*entry[E] // entries[i] is rows[i]'s
	known   map[seriesKey]*entry[E]
	gen     uint64
	spare   struct { // what placing rows by rank fills
		rows    []row
		entries []*entry[E]
	}
}

type entry[E any] struct {
	gen  uint64 // the last collection that read it
	rank int    // its place in the last collection that sorted
	v    E
}

// read reads g's resources into r.rows, sorted and merged as described,
// each with its entry, made by newEntry the first time its key is read.
func (r *reading[E]) read(g *slidegate.Guard, newEntry func(seriesKey) E) {
	r.gen++
	r.rows = r.rows[:0]
	valid := true
	hooks.Resources(g, func(res *hooks.Resource) {
		r.rows = append(r.rows, row{Resource: *res})
		valid = valid && utf8.ValidString(res.Name)
	})
	if r.known == nil {
		r.known = map[seriesKey]*entry[E]{}
	}
	sorted := false
	if !valid {
		r.merge()
		sorted = true
	}
	r.entries = r.entries[:0]
	same := len(r.rows) == len(r.known)
	for i := range r.rows {
		k := seriesKey{resource: r.rows[i].Name, inbound: r.rows[i].Inbound}
		e := r.known[k]
		if e == nil {
			e = &entry[E]{v: newEntry(k)}
			r.known[k] = e
			same = false
		}
		same = same && e.gen == r.gen-1
		e.gen = r.gen
		r.entries = append(r.entries, e)
	}
	if len(r.known) > len(r.rows) { // forget the resources the guard no longer keeps
		for k, e := range r.known {
			if e.gen != r.gen {
				delete(r.known, k)
			}
		}
	}
	switch {
	case same && !sorted:
		r.place()
	case !sorted:
		r.sort()
	}
	for i, e := range r.entries {
		e.rank = i
	}
}

// place puts each row at its entry's rank: the same resources as the
// collection before, whose ranks are a permutation of the rows' places.
func (r *reading[E]) place() {
	n := len(r.rows)
	rows, entries := slices.Grow(r.spare.rows[:0], n)[:n], slices.Grow(r.spare.entries[:0], n)[:n]
	for i, e := range r.entries {
		rows[e.rank], entries[e.rank] = r.rows[i], e
	}
	r.spare.rows, r.spare.entries = r.rows, r.entries
	r.rows, r.entries = rows, entries
}

// sort sorts the rows and their entries by name: a name is one resource
// when every name is valid UTF-8.
func (r *reading[E]) sort() {
	idx := make([]int32, len(r.rows))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(r.rows[a].Name, r.rows[b].Name) })
	n := len(r.rows)
	rows, entries := slices.Grow(r.spare.rows[:0], n)[:n], slices.Grow(r.spare.entries[:0], n)[:n]
	for i, j := range idx {
		rows[i], entries[i] = r.rows[j], r.entries[j]
	}
	r.spare.rows, r.spare.entries = r.rows, r.entries
	r.rows, r.entries = rows, entries
}

// merge sorts the rows by the guard's names, makes the names attribute
// values, and adds up those that then share a value and a direction, in
// the order of their first: two observations of one attribute set in a
// collection would be one series told twice. Names are almost always
// valid UTF-8, and then read does not call it.
func (r *reading[E]) merge() {
	slices.SortFunc(r.rows, func(a, b row) int { return strings.Compare(a.Name, b.Name) })
	type key struct {
		name    string
		inbound bool
	}
	at := map[key]int{}
	out := r.rows[:0]
	for _, s := range r.rows {
		s.Name = exported.Value(s.Name)
		k := key{s.Name, s.Inbound}
		i, ok := at[k]
		if !ok {
			s.seconds = s.Totals.RT.Seconds()
			at[k] = len(out)
			out = append(out, s)
			continue
		}
		m := &out[i]
		m.InFlight += s.InFlight
		m.Totals.Allowed += s.Totals.Allowed
		m.Totals.Succeeded += s.Totals.Succeeded
		m.Totals.Failed += s.Totals.Failed
		m.Totals.RT += s.Totals.RT
		for x := range m.Totals.BlockedBy {
			m.Totals.BlockedBy[x] += s.Totals.BlockedBy[x]
			m.Totals.WouldBlockBy[x] += s.Totals.WouldBlockBy[x]
		}
		m.seconds += s.Totals.RT.Seconds()
		m.more = append(m.more, s.Latency)
	}
	r.rows = out
}
