package slidegate

import (
	"context"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/bounds"
)

// A Resource is a handle on one resource of a guard. Entering through it
// is [Guard.Enter] without looking the name up. Keep one for each
// resource entered often, as a server keeps one for each route. It
// follows the guard's rules as they are set, and is safe for concurrent
// use.
type Resource struct {
	g     *Guard
	name  string
	found atomic.Pointer[found] // what the name was found to be; nil until entered
}

// found is what a Resource's name was found to be under one snapshot of
// the rules (gen, not the snapshot: a handle left idle keeps its own
// binding alive, not every rule of the rules since replaced): its binding
// (nil if no rule names it) and its resource. A resource no rule names is
// kept only while the guard's table holds it: one evicted, or the table's
// OtherResource standing for a name it had no room for, is looked up
// again.
type found struct {
	gen uint64
	b   *binding
	res *resource
}

// Resource returns a handle on the resource called name. A name longer
// than 256 bytes is [OtherResource], as for [Guard.Enter]. It makes
// nothing in the guard until it is entered.
func (g *Guard) Resource(name string) *Resource {
	if len(name) > bounds.MaxNameLength {
		name = OtherResource
	}
	return &Resource{g: g, name: name}
}

// Enter is [Guard.Enter] on the resource.
func (r *Resource) Enter(ctx context.Context, opts ...EntryOption) (Entry, error) {
	return r.EnterAt(ctx, r.g.clock.Now(), opts...)
}

// EnterAt is [Guard.EnterAt] on the resource.
func (r *Resource) EnterAt(ctx context.Context, now int64, opts ...EntryOption) (Entry, error) {
	return r.g.enterAt(ctx, now, r.name, r, opts)
}

// at returns the resource's binding under snap (nil if no rule names it)
// and its resource.
func (r *Resource) at(snap *snapshot, now int64) (*binding, *resource) {
	f := r.found.Load()
	switch {
	case f == nil || f.gen != snap.gen || f.b == nil && f.res.evicted.Load():
		f = r.find(snap, now)
	case f.b == nil:
		f.res.touch(now) // as the table does when it finds the name
	}
	return f.b, f.res
}

// find looks the name up under snap, as Guard.EnterAt does, and keeps what
// it found for the next requests if it is the name's own resource.
func (r *Resource) find(snap *snapshot, now int64) *found {
	f := &found{gen: snap.gen, b: snap.by[r.name]}
	if f.b != nil {
		f.res = f.b.res
	} else {
		f.res = r.g.resources.get(r.name, now)
		if f.res.name != r.name {
			return f // the table's OtherResource, for now: ask it again next time
		}
	}
	r.found.Store(f)
	return f
}
