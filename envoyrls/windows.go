package envoyrls

import (
	"time"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/flowstate"
)

// A window holds one rule's keys to at most limit hits in any interval.
// A request is decided in two steps over the windows of its descriptors:
// left, which counts nothing, for every descriptor; then allow, for each
// one that is counted. Where the windows are kept is the backend's
// choice: in the process (local, below); in Redis, shared by many
// instances (shared, in redis.go), whose backend is joint: it counts all
// of a request's windows in one step, all or none.
type window interface {
	// left is how many hits key may have at now before the window
	// refuses it.
	left(now int64, key string) int64
	// allow counts n hits of key at now if they fit, and says when they
	// would if they do not.
	allow(now int64, key string, n int64) flow.Decision
}

// A backend makes windows.
type backend interface {
	window(limit int64, interval time.Duration) (window, error)
}

// A joint backend counts a request's windows together: every ask, or,
// when one does not fit, none.
type joint interface {
	// allowAll counts every ask at now and returns -1 and an allowed
	// decision; or the index of an ask that does not fit and its
	// decision, nothing counted. Either way it sets each ask's room.
	allowAll(now int64, asks []ask) (int, flow.Decision)
}

// An ask is n hits of key in window w, one of the joint backend's.
type ask struct {
	w    window
	key  string
	n    int64
	room int64 // what key had left in w before allowAll, as left says
}

// local keeps windows in the process: a flow.KeyedQPS each, every one
// drawing from one key memory.
type local struct {
	mem    *flow.KeyMemory
	clock  clock.Clock
	leftAt func(q any, now int64, key string) int64
}

func newLocal(mem *flow.KeyMemory, c clock.Clock) *local {
	return &local{mem: mem, clock: c, leftAt: flowstate.KeyedLeftAt}
}

func (l *local) window(limit int64, interval time.Duration) (window, error) {
	q, err := flow.NewKeyedQPS(flow.KeyedQPSSettings{
		Windows:   []flow.KeyWindow{{Limit: limit, Interval: interval, Buckets: windowBuckets}},
		KeyMemory: l.mem,
		Clock:     l.clock,
	})
	if err != nil {
		return nil, err
	}
	return &localWindow{q: q, leftAt: l.leftAt}, nil
}

// A localWindow keeps no key past a call: flow's limiter counts a key by
// its hash and copies the bytes it shows. So a decision may pass it keys
// whose bytes it reuses afterwards (scratch.key).
type localWindow struct {
	q      *flow.KeyedQPS
	leftAt func(q any, now int64, key string) int64
}

func (w *localWindow) left(now int64, key string) int64 { return w.leftAt(w.q, now, key) }

func (w *localWindow) allow(now int64, key string, n int64) flow.Decision {
	d, _ := w.q.AllowNAt(now, key, n)
	return d
}
