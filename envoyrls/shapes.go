package envoyrls

import (
	"fmt"
	"sync"
	"time"
)

// A shape is a limit and its interval. Each shape has one window, shared
// by every rule of that shape and every request that sets it itself: a
// descriptor's key (its domain and entries) tells its counts apart from
// the others', and a key is always one rule's. So the windows are as many
// as the distinct limits, not as the rules.
type shape struct {
	limit    uint32
	interval time.Duration
}

// shapes are the windows of a service by shape. A shape of a rule in force
// is pinned. The others, loose, are those requests set themselves and
// those rules had before a reload: at most maxLooseShapes of them, one
// unused for its whole interval counting nothing any more and giving its
// place up.
type shapes struct {
	mu    sync.Mutex
	m     map[shape]*shapeWindow
	loose int
}

type shapeWindow struct {
	w      window
	pinned bool
	last   int64 // when a request or a reload last used it
}

// pin makes the windows of the shapes in need, pins them, and loosens
// the others, as of time now. It returns the windows of need.
func (sh *shapes) pin(b backend, now int64, need map[shape]bool) (map[shape]window, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := make(map[shape]window, len(need))
	for k := range need {
		e := sh.m[k]
		if e == nil {
			w, err := b.window(int64(k.limit), k.interval)
			if err != nil {
				return nil, fmt.Errorf("envoyrls: %d per %v: %w", k.limit, k.interval, err)
			}
			e = &shapeWindow{w: w}
			sh.m[k] = e
		} else if !e.pinned {
			sh.loose--
		}
		e.pinned = true
		out[k] = e.w
	}
	for k, e := range sh.m {
		if e.pinned && !need[k] {
			e.pinned, e.last = false, now
			sh.loose++
		}
	}
	for sh.loose > maxLooseShapes && sh.evict(now) {
	}
	return out, nil
}

// take returns the window of shape k for a request at time now: that of a
// rule if one has the shape, else a loose one. It reports false when
// maxLooseShapes are in use.
func (sh *shapes) take(b backend, now int64, k shape) (window, bool, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil {
		if sh.loose >= maxLooseShapes && !sh.evict(now) {
			return nil, false, nil
		}
		w, err := b.window(int64(k.limit), k.interval)
		if err != nil {
			return nil, true, err
		}
		e = &shapeWindow{w: w}
		sh.m[k] = e
		sh.loose++
	}
	e.last = max(e.last, now)
	return e.w, true, nil
}

// evict drops one loose window unused for its whole interval, and reports
// whether it found one.
func (sh *shapes) evict(now int64) bool {
	for k, e := range sh.m {
		if !e.pinned && now-e.last > int64(k.interval) {
			delete(sh.m, k)
			sh.loose--
			return true
		}
	}
	return false
}
