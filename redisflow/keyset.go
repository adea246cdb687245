package redisflow

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/clusterkeys"
	"github.com/slidegate/slidegate/internal/flowstate"
)

var (
	//go:embed left.lua
	leftSource string
	//go:embed giveback.lua
	giveBackSource string

	leftScript     = &script{redis.NewScript(leftSource), "the keyed room script"}
	giveBackScript = &script{redis.NewScript(giveBackSource), "the give-back script"}
)

func init() {
	clusterkeys.Left = func(ctx context.Context, l any, now int64, key string) int64 {
		return l.(*KeyedLimiter).leftAt(ctx, now, key)
	}
	clusterkeys.AllowAll = allowKeySet
}

// leftAt returns how many permits key may take at now under every window:
// the least room, at least 0. It counts nothing: one round trip to the
// left script, or, while Redis cannot answer, the fallback's room.
func (l *KeyedLimiter) leftAt(ctx context.Context, now int64, key string) int64 {
	key = cut(key)
	if l.c.down.Load() || ctx.Err() != nil {
		return l.fallbackLeft(now, key)
	}
	rctx, cancel := context.WithTimeout(ctx, l.c.timeout)
	defer cancel()
	l.c.roundTrips.Add(1)
	args := make([]any, 0, 3*len(l.windows))
	least := int64(-1)
	for j := range l.windows {
		w := &l.windows[j]
		limit := w.limitFor(key)
		if least < 0 || limit < least {
			least = limit
		}
		args = append(args, limit, w.widthArg, w.bucketArg)
	}
	cmd := l.c.runAs(rctx, leftScript, l.named, l.keys(key), args...)
	err := cmd.Err()
	var left int64
	if err == nil {
		v, ok := cmd.Val().(int64)
		switch {
		case !ok:
			err = fmt.Errorf("%w: the keyed room script answered a %T; want an integer", ErrMalformedReply, cmd.Val())
		case v > least:
			err = fmt.Errorf("%w: the keyed room script answered %d; want at most the least limit, %d", ErrMalformedReply, v, least)
		}
		left = v
	}
	if err != nil {
		if ctx.Err() == nil {
			l.c.failed(err)
		}
		return l.fallbackLeft(now, key)
	}
	return max(left, 0)
}

// fallbackLeft is leftAt while Redis cannot answer: the room the fallback
// would give key.
func (l *KeyedLimiter) fallbackLeft(now int64, key string) int64 {
	switch l.c.fallback {
	case FailOpen:
		least := l.windows[0].limitFor(key)
		for j := range l.windows {
			least = min(least, l.windows[j].limitFor(key))
		}
		return least
	case FailClosed:
		return 0
	}
	return max(flowstate.KeyedLeftAt(l.localFor(l.c.instances.Load()).q, now, key), 0)
}

// A keySetWindow is one window of a key set's decision: the window, whose
// ask it counts for, and the permits it needs.
type keySetWindow struct {
	w   *keyWindow
	ask int // the index of the ask, as given
	n   int64
}

// allowKeySet decides asks together, all or none: one run of the keyed script
// over every window of every ask's key, which also answers each window's
// room. On a Redis Cluster, whose keys of one set may lie in several
// slots, it is one run per slot; if one refuses, every run that granted
// gives its permits back. Asks of one limiter and key, and any two that
// name one Redis string, are counted as one of their summed permits. See
// clusterkeys.AllowAll.
func allowKeySet(ctx context.Context, now int64, asks []clusterkeys.Ask) (int, flow.Decision) {
	var c *Cluster
	var keys []string
	var ws []keySetWindow
	index := map[string]int{} // a Redis key: its place in keys
	refuse := func(i int, reason flow.Reason) (int, flow.Decision) {
		roomsOf(ctx, now, asks)
		return i, flow.Decision{Reason: reason}
	}
	for i, a := range asks {
		if a.N <= 0 {
			continue
		}
		l := a.Limiter.(*KeyedLimiter)
		switch {
		case c == nil:
			c = l.c
		case l.c != c:
			return refuse(i, flow.RateLimited)
		}
		key := cut(a.Key)
		for j, rk := range l.keys(key) {
			w := &l.windows[j]
			if p, ok := index[rk]; ok {
				// ws[p].n is within the limit: the difference cannot
				// overflow, where the sum could (a hostile count of 2^63-1).
				if a.N > w.limitFor(key)-ws[p].n {
					return refuse(i, flow.ExceedsLimit)
				}
				ws[p].n += a.N
				continue
			}
			if a.N > w.limitFor(key) {
				return refuse(i, flow.ExceedsLimit)
			}
			index[rk] = len(keys)
			keys = append(keys, rk)
			ws = append(ws, keySetWindow{w: w, ask: i, n: a.N})
		}
	}
	if c == nil {
		return -1, allowed
	}
	if c.down.Load() || ctx.Err() != nil {
		return fallbackAll(now, asks, c)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	room := make([]int64, len(keys)) // each window's room, before the call
	var granted []grantedRun
	refused, retry := -1, time.Duration(0)
	var err error
	for _, run := range runsOf(c, keys) {
		var r keyedReply
		if r, err = countRun(rctx, c, keys, ws, asks, run, room); err != nil {
			break
		}
		if r.window < 0 {
			granted = append(granted, grantedRun{run: run, at: r.now})
		} else if refused < 0 {
			refused, retry = ws[run[r.window]].ask, r.retry
		}
	}
	if err == nil && refused < 0 {
		setRooms(asks, index, room)
		return -1, allowed
	}
	// Refused, or Redis failed: what the runs counted is given back. A
	// give-back that fails leaves it held, refused early.
	failed := err
	if gerr := giveBack(rctx, c, keys, ws, granted); failed == nil {
		failed = gerr
	}
	if failed != nil && ctx.Err() == nil {
		c.failed(failed)
	}
	if err != nil {
		return fallbackAll(now, asks, c)
	}
	setRooms(asks, index, room)
	return refused, flow.Decision{Reason: flow.RateLimited, RetryAfter: retry}
}

// setRooms sets each ask's room to the least room, at least 0, of the
// windows of its key: room holds each Redis key's, by its place in index.
func setRooms(asks []clusterkeys.Ask, index map[string]int, room []int64) {
	for i, a := range asks {
		if a.N <= 0 {
			continue
		}
		r := int64(math.MaxInt64)
		for _, rk := range a.Limiter.(*KeyedLimiter).keys(cut(a.Key)) {
			r = min(r, room[index[rk]])
		}
		asks[i].Room = max(r, 0)
	}
}

// roomsOf sets the room of every ask of permits from its limiter, one
// round trip each, for a set refused before it reached the script.
func roomsOf(ctx context.Context, now int64, asks []clusterkeys.Ask) {
	for i, a := range asks {
		if a.N > 0 {
			asks[i].Room = a.Limiter.(*KeyedLimiter).leftAt(ctx, now, a.Key)
		}
	}
}

// runsOf splits a key set's Redis keys into the runs of the keyed script
// that count them: one run, or, on a Redis Cluster, one per slot, for one
// script run cannot span slots. Each run lists places in keys.
func runsOf(c *Cluster, keys []string) [][]int {
	all := make([]int, len(keys))
	for p := range all {
		all[p] = p
	}
	if c.slots == nil || len(keys) == 1 {
		return [][]int{all}
	}
	var runs [][]int
	bySlot := map[int]int{} // a slot: its run
	for p, k := range keys {
		s := slot(k)
		r, ok := bySlot[s]
		if !ok {
			r = len(runs)
			bySlot[s] = r
			runs = append(runs, nil)
		}
		runs[r] = append(runs[r], p)
	}
	return runs
}

// A grantedRun is a run of the keyed script that granted its permits, at
// at, the server's time in microseconds.
type grantedRun struct {
	run []int
	at  int64
}

// countRun runs the keyed script over the keys of run, all or none, and
// sets room[p], for each place p of run, to its window's room before.
func countRun(ctx context.Context, c *Cluster, keys []string, ws []keySetWindow, asks []clusterkeys.Ask, run []int, room []int64) (keyedReply, error) {
	rkeys := make([]string, len(run))
	args := make([]any, 0, 4*len(run)+1)
	windows := make([]keyWindow, len(run)) // for the reply's checks
	limits := make([]int64, len(run))
	for i, p := range run {
		x := ws[p]
		rkeys[i] = keys[p]
		limits[i] = x.w.limitFor(cut(asks[x.ask].Key))
		args = append(args, x.n, limits[i], x.w.widthArg, x.w.bucketArg)
		windows[i] = *x.w
	}
	args = append(args, "rooms")
	c.roundTrips.Add(1)
	cmd := c.runAs(ctx, keyedScript, rkeys[0], rkeys, args...)
	if err := cmd.Err(); err != nil {
		return keyedReply{}, err
	}
	r, rooms, err := decodeRoomsReply(cmd.Val(), windows, limits)
	if err == nil {
		for i, p := range run {
			room[p] = rooms[i]
		}
	}
	return r, err
}

// giveBack takes back what the runs of granted counted, for a key set
// refused in a later run: one run of the give-back script each. Until
// then, the permits are held, and others may be refused for them: a key
// set over several slots is refused early, never allowed late.
func giveBack(ctx context.Context, c *Cluster, keys []string, ws []keySetWindow, granted []grantedRun) error {
	var first error
	for _, g := range granted {
		rkeys := make([]string, len(g.run))
		args := make([]any, 0, 4*len(g.run))
		for i, p := range g.run {
			rkeys[i] = keys[p]
			args = append(args, ws[p].n, g.at, ws[p].w.widthArg, ws[p].w.bucketArg)
		}
		c.roundTrips.Add(1)
		if err := c.runAs(ctx, giveBackScript, rkeys[0], rkeys, args...).Err(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// fallbackAll is allowKeySet while Redis cannot answer: the cluster's
// fallback. With Local, every ask is checked against its limiter's Local
// windows before any is counted; a request taking the room between the
// check and the count refuses the rest, the asks counted before staying
// counted (refused early, never allowed late).
func fallbackAll(now int64, asks []clusterkeys.Ask, c *Cluster) (int, flow.Decision) {
	c.fallbacks.Add(1)
	for i, a := range asks {
		if a.N > 0 {
			asks[i].Room = a.Limiter.(*KeyedLimiter).fallbackLeft(now, cut(a.Key))
		}
	}
	switch c.fallback {
	case FailOpen:
		return -1, allowed
	case FailClosed:
		return 0, flow.Decision{Reason: flow.RateLimited}
	}
	instances := c.instances.Load()
	need := map[*flow.KeyedQPS]map[string]int64{}
	for i, a := range asks {
		if a.N <= 0 {
			continue
		}
		q := a.Limiter.(*KeyedLimiter).localFor(instances).q
		key := cut(a.Key)
		if need[q] == nil {
			need[q] = map[string]int64{}
		}
		need[q][key] = clusterkeys.Sum(need[q][key], a.N)
		if flowstate.KeyedLeftAt(q, now, key) < need[q][key] {
			// Refused, and so counted nowhere: the window says when.
			if d, _ := q.AllowNAt(now, key, need[q][key]); !d.Allowed {
				return i, d
			}
			return i, flow.Decision{Reason: flow.RateLimited}
		}
	}
	for i, a := range asks {
		if a.N <= 0 {
			continue
		}
		if d, _ := a.Limiter.(*KeyedLimiter).localFor(instances).q.AllowNAt(now, cut(a.Key), a.N); !d.Allowed {
			return i, d
		}
	}
	return -1, allowed
}
