package slidegate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/flowlimits"
)

// An EntryOption modifies one Enter.
type EntryOption struct {
	kind  entryOptionKind
	count int64
	key   string
}

type entryOptionKind uint8

const (
	optCount entryOptionKind = iota + 1
	optPriority
	optInbound
	optKey
)

// WithCount makes the request count as n (a batch): rules and statistics
// count n requests. n below 1 counts as 1, and n above 2^32-1, the largest
// limit a rule can have, as 2^32-1: a batch within any limit is
// counted whole.
func WithCount(n int64) EntryOption { return EntryOption{kind: optCount, count: n} }

// WithPriority marks the request as prioritized: a QPS rule with Borrow may
// lend it a place in its next bucket, and Enter waits for it.
func WithPriority() EntryOption { return EntryOption{kind: optPriority} }

// WithInbound marks the request as traffic into the service, a request it
// serves. The guard also counts it in [Guard.Stats] of [InboundResource], and the rules
// of [InboundResource] apply to it. Without it, a request is outbound: a
// call the service makes.
func WithInbound() EntryOption { return EntryOption{kind: optInbound} }

// WithKey names the key of the request: the user, tenant, client address or
// API key that the resource's per-key rules (FlowRule.PerKey) limit on its
// own. A request without a key is counted under the empty key "", one key
// like any other. A composite key is the caller's to join: write its parts
// with a separator that none of them can contain ("tenant-a/alice"), or
// with their lengths ("8:tenant-a5:alice") when any byte may occur. Keys up
// to 256 bytes are told apart whole; a longer key is told apart by
// its first 256 bytes. The guard copies the keys it keeps (the
// hot keys it shows, see FlowRule.PerKey) and keeps no other.
func WithKey(key string) EntryOption { return EntryOption{kind: optKey, key: key} }

// An Entry is one request allowed by Enter. Exit it exactly once when the
// request ends; exiting again, or exiting a copy, does nothing. The zero Entry
// (what Enter returns with an error) ignores Exit.
//
// An Entry is a small value, not a pointer. Its state lives in storage the
// guard reuses, and the Entry carries the sequence number of its use. So a
// late second Exit cannot end a later request that reuses the storage.
type Entry struct {
	e   *entry
	seq uint64
}

// entry is an Entry's state, pooled. Each processor's pool holds its own
// entries, and a request writes its entry's fields several times: entries
// made side by side on two processors would share a cache line, the two
// cores taking it from each other on every request (false sharing), so an
// entry fills 128 bytes, an allocation size the allocator aligns to 128.
type entry struct {
	seq      atomic.Uint64 // the use of this entry; Exit moves it on
	g        *Guard
	res      *resource
	inbound  bool
	priority bool
	would    flow.Reason // why the first shadow rule that would have blocked the request would have; flow.NotBlocked if none
	window   int32       // which window of a per-key rule blocked the request
	start    int64
	count    int64
	key      string
	held     []hold // what the request holds of its rules; never grown past its capacity, for a hold must not move
	// The request's waits on its client (Entry.Pause): how many are open,
	// when the first of them began, and how long the closed ones took.
	pauses   atomic.Int32
	pausedAt atomic.Int64
	waited   atomic.Int64
	mark     mark // the bucket of the resource's counter the request was counted in as it entered
}

// exitCounted, for tests, runs in Exit once the resource has counted the
// request: a breaker read then must count no more than it will after.
var exitCounted func()

var entries = sync.Pool{New: func() any { return new(entry) }}

// Exit ends the request: it records err (nil for success) and the response
// time, releases what the request holds, and settles it with the breakers. A
// request that ended with context.Canceled is not counted against breakers:
// the caller gave up.
func (h Entry) Exit(err error) { h.exit(0, false, err) }

// ExitAt is Exit at time now, in nanoseconds on the guard's clock.
func (h Entry) ExitAt(now int64, err error) { h.exit(now, true, err) }

func (h Entry) exit(now int64, given bool, err error) {
	e := h.e
	// Whoever moves the sequence on owns the entry until it is pooled
	// again; a stale or second Exit touches nothing else.
	if e == nil || !e.seq.CompareAndSwap(h.seq, h.seq+1) {
		return
	}
	if !given {
		now = e.g.clock.Now()
	}
	o := breaker.Success
	if err != nil {
		o = breaker.Failure
		if errors.Is(err, context.Canceled) {
			o = breaker.Ignored
		}
	}
	// The response time is the service's: the time the request waited on
	// its client is taken out, and its rules end it that much earlier.
	d := max(now-e.start-e.waitedAt(now), 0)
	served := e.start + d
	// A shared breaker takes away what it will not count before the
	// resource counts the request: in between, it reads less, never more.
	shared := e.res.shared.Load()
	var taken sharedTake
	if shared != nil {
		taken = shared.exiting(e, now, served, o)
	}
	e.res.exit(e.mark, now, d, e.count, err != nil)
	if exitCounted != nil {
		exitCounted()
	}
	if e.inbound {
		e.g.inbound.exit(mark{}, now, d, e.count, err != nil)
	}
	overloaded := err != nil && IsOverloaded(err)
	for i := range e.held {
		h := &e.held[i]
		if h.undoOnly {
			continue
		}
		h.overloaded = overloaded
		h.by.release(h, served, o, false)
	}
	if shared != nil && (taken.add != 0 || given) {
		shared.exited(e, taken, now, served, o)
	}
	e.release()
}

// waitedAt returns how long the request has waited on its client by time
// now, a wait still open included.
func (e *entry) waitedAt(now int64) int64 {
	w := e.waited.Load()
	if e.pauses.Load() > 0 {
		w += max(now-e.pausedAt.Load(), 0)
	}
	return w
}

// Pause says that the request waits on its client from now on. It reads
// the client's body, say, or writes to a client that reads slowly. The
// time until [Entry.Resume] is not the service's: Exit leaves it out of the
// response time. So a slow client makes neither an adaptive limit nor a
// slow-call breaker think the service slow.
//
// The request keeps what it holds of its rules meanwhile: it still holds
// the service's memory and a goroutine. What one client can hold is
// bounded by the overload rules' shares ([FlowRule.Share]). Pauses may
// overlap, a body read on one goroutine and a write on another: time
// counts once. A pause still open at Exit ends there. Pause and Resume do
// nothing on the zero Entry or after Exit.
func (h Entry) Pause() {
	if e := h.e; e != nil && e.seq.Load() == h.seq {
		h.PauseAt(e.g.clock.Now())
	}
}

// PauseAt is [Entry.Pause] at time now, in nanoseconds on the guard's
// clock.
func (h Entry) PauseAt(now int64) {
	if e := h.e; e != nil && e.seq.Load() == h.seq && e.pauses.Add(1) == 1 {
		e.pausedAt.Store(now)
	}
}

// Resume ends a wait that Pause began.
func (h Entry) Resume() {
	if e := h.e; e != nil && e.seq.Load() == h.seq {
		h.ResumeAt(e.g.clock.Now())
	}
}

// ResumeAt is [Entry.Resume] at time now, in nanoseconds on the guard's
// clock.
func (h Entry) ResumeAt(now int64) {
	e := h.e
	if e == nil || e.seq.Load() != h.seq {
		return
	}
	switch n := e.pauses.Add(-1); {
	case n == 0:
		e.waited.Add(max(now-e.pausedAt.Load(), 0))
	case n < 0:
		e.pauses.Add(1) // a Resume without its Pause
	}
}

// Probe reports whether a breaker of the resource let the request through
// as a probe of its half-open circuit: a client should not retry it if it
// fails (see flow.AttemptProbe). It is false for the zero Entry, and once
// the request has exited. Call it before Exit, from the goroutine that
// ends the request.
func (h Entry) Probe() bool {
	e := h.e
	if e == nil || e.seq.Load() != h.seq {
		return false
	}
	for i := range e.held {
		// A hold keeps what an earlier rule wrote in it (see clearHeld):
		// its promise is a breaker's only if a breaker holds it now.
		// A breaker in shadow changes nothing a client does: its probe is
		// no probe.
		if _, ok := e.held[i].by.(*breakerRule); ok && !e.held[i].shadow && e.held[i].promise.Probe() {
			return true
		}
	}
	return false
}

// release returns the entry to the pool.
func (e *entry) release() {
	e.res, e.g, e.key = nil, nil, ""
	e.clearHeld()
	entries.Put(e)
}

// clearHeld forgets what the request held, keeping the storage. The holds
// themselves are not zeroed, which would cost more than the rest of Exit's
// bookkeeping: admit clears a hold's owner before a rule fills it. So a
// pooled entry may keep pointing at limiters and breakers of rules no longer
// in force, at most one per rule of the largest binding it served, until it
// serves as many rules again or sync.Pool drops it.
func (e *entry) clearHeld() { e.held = e.held[:0] }

// Enter asks to use the resource called name for one request, or
// [WithCount](n) of them. If the resource's rules allow it, Enter returns
// its [Entry], which must be exited when the request ends. Otherwise it
// returns a [*BlockError], or ctx.Err() if ctx ended while a throttle made
// the request wait. Enter returns ctx.Err() at once if ctx is already done.
//
// A request whose wait ctx cuts short gives back what it took: its
// throttle's place, its concurrency permits and its breakers' promises. A
// place it borrowed from a QPS rule's next bucket stays counted, as does a
// cluster rule's permit: every admission of those rules counts.
func (g *Guard) Enter(ctx context.Context, name string, opts ...EntryOption) (Entry, error) {
	return g.EnterAt(ctx, g.clock.Now(), name, opts...)
}

// EnterAt is Enter at time now, in nanoseconds on the guard's clock. A
// request that a throttle makes wait still waits on the guard's clock.
func (g *Guard) EnterAt(ctx context.Context, now int64, name string, opts ...EntryOption) (Entry, error) {
	return g.enterAt(ctx, now, name, nil, opts)
}

// enterAt is EnterAt on the resource called name, or, if r is not nil, on
// r's resource (see Resource).
func (g *Guard) enterAt(ctx context.Context, now int64, name string, r *Resource, opts []EntryOption) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	snap := g.snap.Load()
	var b *binding
	var res *resource
	if r != nil {
		b, res = r.at(snap, now)
	} else {
		if len(name) > bounds.MaxNameLength {
			name = OtherResource // no rule names it: see 256
		}
		if b = snap.by[name]; b != nil {
			res = b.res // named by a rule: pinned, so never evicted and never touched
		} else {
			res = g.resources.get(name, now)
		}
	}
	// The options are read into the entry itself: locals would be kept on
	// the stack across the calls below, and copied in after. A pooled
	// entry's key is "" (release).
	e := entries.Get().(*entry)
	e.g, e.res, e.count, e.inbound, e.priority = g, res, 1, false, false
	for _, o := range opts {
		switch o.kind {
		case optKey:
			e.key = o.key
			if len(e.key) > bounds.MaxKeyLength {
				e.key = e.key[:bounds.MaxKeyLength]
			}
		case optCount:
			e.count = min(max(o.count, 1), flowlimits.MaxLimit)
		case optPriority:
			e.priority = true
		case optInbound:
			e.inbound = true
		}
	}
	count, inbound := e.count, e.inbound
	if now >= g.unusedAt.Load() {
		g.checkUnused(now)
	}
	if inbound {
		res.markInbound()
	}
	e.would = flow.NotBlocked // a pooled entry keeps the last request's: admit may not run
	// Loaded first: a store is a locked exchange, and these are zero
	// unless the entry's last request paused.
	if e.pauses.Load() != 0 {
		e.pauses.Store(0)
	}
	if e.waited.Load() != 0 {
		e.waited.Store(0)
	}
	// The rules to ask: the resource's, after those of all the inbound
	// traffic for an inbound request, in one list made when the rules
	// were set.
	var checks []check
	switch {
	case b != nil && inbound:
		checks = b.inbound
	case b != nil:
		checks = b.checks
	case inbound:
		checks = snap.inbound
	}
	if len(checks) > 0 {
		var err error
		if checks[0].pair {
			err = admitPair(ctx, e, now, checks)
		} else {
			err = admit(ctx, g.clock, e, now, checks)
		}
		if err != nil {
			if be, blocked := err.(*BlockError); blocked {
				res.block(now, be.Reason, count)
				if inbound {
					g.inbound.block(now, be.Reason, count)
				}
			}
			e.release()
			return Entry{}, err
		}
		now = e.start // after any wait
	}
	e.start = now
	e.mark = res.allow(now, count)
	if inbound {
		g.inbound.allow(now, count)
	}
	if e.would != flow.NotBlocked {
		res.wouldBlock(e.would, count)
		if inbound {
			g.inbound.wouldBlock(e.would, count)
		}
	}
	return Entry{e: e, seq: e.seq.Load()}, nil
}

// admit asks the rules of a list (those of the inbound traffic, then the
// resource's, each in phase order: see binding), in order, whether entry e
// may go at time now, and leaves in e what the request holds of them. When a rule
// blocks it, the rules before give back what they gave. It sets e.start to
// the time the request may go: now, or later if a throttle or a borrowed
// place makes it wait. A rule that panics (a cluster's client on a reply
// it cannot read, a user's limiter) is answered the same way: the rules
// before it give back what they gave, and the panic goes on. One function,
// not a loop called under the deferred undo: a call fewer on every request.
func admit(ctx context.Context, c clock.Clock, e *entry, now int64, checks []check) (err error) {
	e.start, e.would = now, flow.NotBlocked
	if n := len(checks); cap(e.held) < n {
		e.held = make([]hold, 0, n)
	}
	returned := false
	defer func() {
		if !returned {
			e.undo(now)
		}
	}()
	var wait time.Duration
	for i := range checks {
		ch := &checks[i]
		e.held = e.held[:len(e.held)+1]
		h := &e.held[len(e.held)-1]
		h.by, h.shadow, h.undoOnly = nil, ch.shadow, false // the hold of an earlier use of the entry
		e.window = -1
		d := ch.rule.admit(ctx, e, now, h)
		if h.by == nil {
			e.held = e.held[:len(e.held)-1] // the rule gave nothing to hold
		}
		if ch.shadow {
			// Decided and counted as usual, never enforced: a refusal is
			// noted, and a wait (a throttle's place) is not waited.
			if !d.Allowed && e.would == flow.NotBlocked {
				e.would = d.Reason
			}
			continue
		}
		if !d.Allowed {
			e.undo(now)
			returned = true
			return refusal(e, ch, d)
		}
		wait = max(wait, d.Wait)
	}
	if wait > 0 {
		if err := clock.Sleep(ctx, c, wait); err != nil {
			e.undo(now)
			returned = true
			return err
		}
		e.start = now + int64(wait)
	}
	returned = true
	return nil
}

// refusal returns the error of the request of entry e, which check ch
// refused with decision d.
func refusal(e *entry, ch *check, d flow.Decision) *BlockError {
	be := &BlockError{Resource: e.res.name, Rule: ch.name, Reason: d.Reason, RetryAfter: d.RetryAfter}
	if ch.keyed {
		// A copy: the key may be a piece of a large string (a header) the
		// error must not keep alive.
		be.Key = strings.Clone(e.key)
	}
	if ch.names != nil && e.window >= 0 && int(e.window) < len(*ch.names) {
		be.Rule = (*ch.names)[e.window]
	}
	return be
}

// markPair sets check.pair on the first of checks if they are a breaker
// and a plain QPS rule, neither in shadow.
func markPair(checks []check) {
	if len(checks) != 2 || checks[0].shadow || checks[1].shadow {
		return
	}
	_, br := checks[0].rule.(*breakerRule)
	_, qps := checks[1].rule.(*qpsRule)
	checks[0].pair = br && qps
}

// admitPair is admit for checks that markPair marked: it decides as admit
// does, calling the two rules directly. Neither calls code but the
// guard's, so no undo is deferred against a panic; neither makes a request
// wait; and the QPS rule, the last, gives the request nothing to hold:
// what it counted is given back only if a later rule blocks the request.
func admitPair(ctx context.Context, e *entry, now int64, checks []check) error {
	br, q := checks[0].rule.(*breakerRule), checks[1].rule.(*qpsRule)
	e.start = now
	if cap(e.held) < 2 {
		e.held = make([]hold, 0, 2)
	}
	e.held = e.held[:1]
	h := &e.held[0]
	h.shadow, h.undoOnly = false, false
	if d := br.admit(ctx, e, now, h); !d.Allowed {
		e.clearHeld()
		return refusal(e, &checks[0], d)
	}
	if d := q.q.AllowNAt(now, e.count); !d.Allowed {
		br.release(h, now, breaker.Ignored, true)
		e.clearHeld()
		return refusal(e, &checks[1], d)
	}
	return nil
}

// undo gives back what a blocked request took from the rules before the one
// that blocked it.
func (e *entry) undo(now int64) {
	for i := range e.held {
		// The last hold's rule may have panicked before it filled it.
		if by := e.held[i].by; by != nil {
			by.release(&e.held[i], now, breaker.Ignored, true)
		}
	}
	e.clearHeld()
}

// Do runs fn as one request to the resource called name: Enter, fn, Exit
// with fn's error. If Enter blocks it, Do returns its error without running
// fn. If fn panics, the request exits with an error and the panic goes on.
// Do times a real call, reading the clock before and after it, so it has no
// ...At twin: a simulation calls EnterAt and ExitAt.
func (g *Guard) Do(ctx context.Context, name string, fn func() error, opts ...EntryOption) (err error) {
	e, err := g.Enter(ctx, name, opts...)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			e.Exit(errPanicked)
		}
	}()
	err = fn()
	done = true
	e.Exit(err)
	return err
}

var errPanicked = errors.New("slidegate: the request panicked")
