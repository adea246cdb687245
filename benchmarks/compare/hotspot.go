package compare

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sapi "github.com/alibaba/sentinel-golang/api"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
)

// The per-key speed rows: one request through a resource with a per-key
// limit, its key named with the request, every request allowed, so that the
// rows measure finding the key's count, deciding and counting, not
// blocking. slidegate's guard has a per-key QPS rule (FlowRule.PerKey) and
// is entered with WithKey; sentinel has a hotspot rule (hotspot.Rule, QPS,
// Reject) on the first argument of Entry, given with api.WithArgs, and
// goes through its whole slot chain.
//
// KeyEnterExit enters with one key, over and over: a hot key. KeysEnterExit
// enters with a million distinct keys, in order, each once per million
// requests, as a public API's clients might come: the rows' Setups enter
// every key once before the timer starts (sentinel only as many as its
// caches keep, which it then has full), so that the limiters are at their
// working size (see warmUp).

func init() {
	Shapes = append(Shapes, keyEnterExit, keysEnterExit)
}

// keysResource is the resource of the slidegate per-key rows. Each Setup
// makes its own Guard, so the name cannot collide.
const keysResource = "keyed"

// keysHotLimit is the per-key limit of the one-key rows: never reached.
const keysHotLimit = 1 << 30

// keysLimit is the per-key limit of the million-key rows: each key comes
// once per million requests, far below it.
const keysLimit = 100

// speedKeys are the million keys of KeysEnterExit, made once.
var speedKeys = sync.OnceValue(func() []string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
})

// nextKey returns an Op's key source: speedKeys in order, from a counter
// shared by the goroutines of a parallel row, every row alike.
func nextKey() func() string {
	keys := speedKeys()
	c := new(keyCursor)
	return func() string { return keys[c.next.Add(1)&(uint64(len(keys))-1)] }
}

// A keyCursor is the counter of nextKey, alone on its cache line: a
// counter allocated next to a word the guard writes on every request
// would make the cores of a parallel row take the line from each other
// on every request (false sharing), which tripled its time in a trial.
type keyCursor struct {
	_    [64]byte
	next atomic.Uint64
	_    [56]byte
}

// hotSpeedKey is the key of the one-key rows.
const hotSpeedKey = "user-1"

// newKeyedGuard returns a guard with one per-key QPS rule of limit per
// second on keysResource, with the given overrides.
func newKeyedGuard(b *testing.B, limit int64, overrides map[string]int64) *slidegate.Guard {
	g, err := slidegate.New()
	if err != nil {
		b.Fatal(err)
	}
	if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: keysResource, Limit: limit, PerKey: true, Overrides: overrides}}}); err != nil {
		b.Fatal(err)
	}
	return g
}

// guardKeyOp enters the guard's keysResource with the key key() returns,
// and exits with success.
func guardKeyOp(g *slidegate.Guard, key func() string) Op {
	ctx := context.Background()
	return func() int64 {
		e, err := g.Enter(ctx, keysResource, slidegate.WithKey(key()))
		if err != nil {
			return 0
		}
		e.Exit(nil)
		return 1
	}
}

// hotspotKeyOp loads a hotspot rule of limit per second on a fresh resource,
// removed when the benchmark ends, and returns the operation: Entry with
// the key key() returns as its argument, and Exit.
func hotspotKeyOp(b *testing.B, limit int64, key func() string) Op {
	res, unload, err := loadHotspotRule(limit, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(unload)
	return func() int64 {
		e, blocked := sapi.Entry(res, sapi.WithArgs(key()))
		if blocked != nil {
			return 0
		}
		e.Exit()
		return 1
	}
}

// keyEnterExit enters a resource with a per-key rule with one key.
var keyEnterExit = &Shape{
	ID:   "KeyEnterExit",
	Name: "Enter + Exit with a key, a per-key QPS rule, one key (hot), every request allowed",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		// With a limit of 2^30 the key never uses more than half of it,
		// so it stays in the sketch: the row measures the sketch's path
		// (three counters of one cache line, one shard's mutex).
		{Name: "slidegate Guard.Enter+Exit, WithKey (sketch)", Role: Ours, Setup: func(b *testing.B) Op {
			g := newKeyedGuard(b, keysHotLimit, nil)
			return allows(b, "slidegate per-key", guardKeyOp(g, func() string { return hotSpeedKey }))
		}},
		// The key has an override (of the same limit), which gives it an
		// exact window from the start: the path of a hot key.
		{Name: "slidegate Guard.Enter+Exit, WithKey (exact window)", Role: Ours, Setup: func(b *testing.B) Op {
			g := newKeyedGuard(b, keysHotLimit, map[string]int64{hotSpeedKey: keysHotLimit})
			return allows(b, "slidegate per-key, exact", guardKeyOp(g, func() string { return hotSpeedKey }))
		}},
		// The same request without a key, on a resource with a QPS rule:
		// what a key adds.
		{Name: "slidegate Guard.Enter+Exit, QPS rule, no key", Role: Ours, Setup: func(b *testing.B) Op {
			g, err := slidegate.New()
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: keysResource, Limit: keysHotLimit}}}); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			return allows(b, "slidegate no key", func() int64 {
				e, err := g.Enter(ctx, keysResource)
				if err != nil {
					return 0
				}
				e.Exit(nil)
				return 1
			})
		}},
		{Name: "sentinel api.Entry+Exit, WithArgs(key), hotspot rule", Setup: func(b *testing.B) Op {
			return allows(b, "sentinel hotspot", hotspotKeyOp(b, keysHotLimit, func() string { return hotSpeedKey }))
		}},
	},
}

// warmUp reports whether a row's Setup should bring its limiter to its
// working size before the timer starts: not for a run of one request
// (TestRows, -benchtime 1x, and the first round of every benchmark),
// which measures nothing and only checks that the row runs.
func warmUp(b *testing.B) bool { return b.N > 1 }

// keysEnterExit enters a resource with a per-key rule with a million keys
// in order.
var keysEnterExit = &Shape{
	ID:   "KeysEnterExit",
	Name: "Enter + Exit with a key, a per-key QPS rule, a million keys in order, every request allowed",
	Impls: []Impl{
		timeNow,
		{Name: "clock.System.Now", Setup: func(*testing.B) Op {
			return func() int64 { return clock.System.Now() }
		}},
		{Name: "slidegate Guard.Enter+Exit, WithKey", Role: Ours, Setup: func(b *testing.B) Op {
			g := newKeyedGuard(b, keysLimit, nil)
			key := nextKey()
			op := guardKeyOp(g, key)
			if warmUp(b) {
				for range len(speedKeys()) {
					op() // every key once: the sketch at its size
				}
			}
			return allows(b, "slidegate per-key", op)
		}},
		{Name: "sentinel api.Entry+Exit, WithArgs(key), hotspot rule", Setup: func(b *testing.B) Op {
			key := nextKey()
			op := hotspotKeyOp(b, keysLimit, key)
			if warmUp(b) {
				for range hotspotCapacity(time.Second) {
					op() // its caches full
				}
			}
			return allows(b, "sentinel hotspot", op)
		}},
	},
}
