package slidegate

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/breaker"
	"github.com/slidegate/slidegate/internal/bounds"
	"github.com/slidegate/slidegate/internal/hooks"
	"github.com/slidegate/slidegate/internal/notify"
	"github.com/slidegate/slidegate/internal/textcut"
)

// The kinds of event (Event.Kind).
const (
	breakerChanged = "breaker_changed"
	rulesChanged   = "rules_changed"
	rulesRefused   = "rules_refused"
	clusterChanged = "cluster_changed"
	resourcesFull  = "resources_full"
	rulesUnused    = "rules_unused"
)

// An Event is something that happened to a guard that its operators want
// to know of when it happens, rather than by polling: a breaker opening,
// rules reloaded, the cluster down. Listen with Guard.OnEvent; the guard
// also logs its events through its logger (WithLogger: a logger more than
// 256 events behind loses the oldest), and keeps the latest
// (Guard.Events). Which fields are set depends on Kind.
type Event struct {
	// Seq numbers the guard's events from 1, in the order they happened.
	Seq uint64
	// At is when it happened, in nanoseconds on the guard's clock.
	At int64
	// Kind says what the event tells, and which fields are set:
	//   - "breaker_changed": a breaker rule's circuit changed state
	//     (Resource, Rule, Breaker). An SRE breaker has no states.
	//   - "rules_changed": a new set of rules is in force (Changes).
	//   - "rules_refused": a set of rules was refused, and the rules in
	//     force stay (Err, Source).
	//   - "cluster_changed": the guard's Cluster became healthy or
	//     unhealthy, or met or got over an error that retrying will not
	//     fix (Cluster).
	//   - "resources_full": the guard had no room for a new resource: it
	//     evicted idle ones, or counted requests as OtherResource (Evicted,
	//     Overflowed). Told at most once a second.
	//   - "rules_unused": a minute after rules were set, no request had
	//     entered the resource of some of them (Changes, each with Change
	//     "unused"). A rule acts only on a resource of its exact name. Told
	//     once for each set of rules.
	Kind string
	// Resource and Rule name the breaker rule of a "breaker_changed" event
	// (Rule is its name, as Rules.Named gives it).
	Resource, Rule string
	// Breaker is the change of a "breaker_changed" event.
	Breaker breaker.Transition
	// Changes are the changes of a "rules_changed" event, in the order of the
	// rules: new and changed rules in the new rules' order, then those
	// removed; at most 64 of them, and MoreChanges counts the
	// rest. For a "rules_unused" event, they are the rules unused, in rule
	// order, flow rules first.
	Changes     []RuleChange
	MoreChanges int
	// Err is why the rules of a "rules_refused" event were refused: a
	// *RulesError listing every problem.
	Err error
	// Source names where the refused rules came from, when a source
	// reported them (rulefile.Follow names its source);
	// "" for rules given to SetRules.
	Source string
	// Cluster is the cluster's health after a "cluster_changed" event.
	Cluster ClusterHealth
	// Evicted counts the idle resources evicted, and Overflowed the
	// requests counted as OtherResource for want of room (not for a name
	// over 256), since the "resources_full" event before. What
	// happens within a second of an event is told by the next one, when
	// the guard is full again; OtherResource's statistics count it
	// meanwhile.
	Evicted, Overflowed int64
}

// A RuleChange is one rule added, removed or changed by a new set of
// rules. Rules are told apart by their resource, their list (flow or
// breakers) and their name (Rules.Named).
type RuleChange struct {
	Resource, Rule string
	// Breaker says the rule is a breaker rule; a flow rule otherwise.
	Breaker bool
	// Change is "added", "removed" or "changed"; "unused" in a
	// "rules_unused" event.
	Change string
	// Fields lists, for a rule changed, each field that changed, with its
	// value before and after: "limit: 100 → 200". Defaults are written
	// out, so a default spelled out changes nothing.
	Fields []string
}

// String describes the change: `flow rule "qps" of "GET /a" changed
// (limit: 100 → 200)`.
func (c RuleChange) String() string {
	list := "flow"
	if c.Breaker {
		list = "breaker"
	}
	s := fmt.Sprintf("%s rule %q of %q %s", list, c.Rule, c.Resource, c.Change)
	if len(c.Fields) > 0 {
		s += " (" + strings.Join(c.Fields, ", ") + ")"
	}
	return s
}

// maxEventText bounds Event.String: a "rules_refused" event's error lists
// every problem of the rules.
const maxEventText = 4096

// String describes the event in one line of at most 4 KiB, as the guard
// logs it.
func (e Event) String() string {
	return textcut.Cut(strings.ReplaceAll(e.text(), "\n\t", "; "), maxEventText)
}

func (e Event) text() string {
	switch e.Kind {
	case breakerChanged:
		return fmt.Sprintf("breaker %q of %q: %v", e.Rule, e.Resource, e.Breaker)
	case rulesChanged:
		if len(e.Changes) == 0 {
			return "rules in force, unchanged"
		}
		parts := make([]string, len(e.Changes))
		for i, c := range e.Changes {
			parts[i] = c.String()
		}
		s := "rules in force: " + strings.Join(parts, "; ")
		if e.MoreChanges > 0 {
			s += fmt.Sprintf("; and %d more changes", e.MoreChanges)
		}
		return s
	case rulesRefused:
		if e.Source != "" {
			return fmt.Sprintf("rules from %s refused; the rules in force stay: %v", e.Source, e.Err)
		}
		return fmt.Sprintf("rules refused; the rules in force stay: %v", e.Err)
	case clusterChanged:
		switch {
		case e.Cluster.Err != nil:
			return fmt.Sprintf("cluster unhealthy: %v", e.Cluster.Err)
		case e.Cluster.Healthy:
			return "cluster healthy"
		default:
			return "cluster unhealthy: its limiters use their fallback"
		}
	case resourcesFull:
		return fmt.Sprintf("no room for new resources: %d idle resources evicted, %d requests counted as %s", e.Evicted, e.Overflowed, OtherResource)
	case rulesUnused:
		parts := make([]string, len(e.Changes))
		for i, c := range e.Changes {
			parts[i] = c.String()
		}
		s := fmt.Sprintf("no request has entered the resource of these rules, set %v ago (a rule acts on the resource of its exact name): %s",
			unusedAfter, strings.Join(parts, "; "))
		if e.MoreChanges > 0 {
			s += fmt.Sprintf("; and %d more rules", e.MoreChanges)
		}
		return s
	}
	return e.Kind
}

// level is the level the guard logs the event at.
func (e Event) level() slog.Level {
	switch {
	case e.Kind == breakerChanged && e.Breaker.To == breaker.Open,
		e.Kind == clusterChanged && !e.Cluster.Healthy,
		e.Kind == resourcesFull, e.Kind == rulesUnused:
		return slog.LevelWarn
	case e.Kind == rulesRefused:
		// SetRules returns the error to its caller, who says where the
		// rules came from (rulefile.Follow logs it at Warn).
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// Bounds of a guard's events (see also internal/bounds).
const (
	// fullEvery is the least time between two "resources_full" events.
	fullEvery = int64(time.Second)
)

// events are a guard's events: numbered, kept, logged and told to its
// listeners. Recording one takes a mutex and copies it into a ring and into
// each listener's queue, and never waits for a listener: the events come
// from rare moments (a breaker changing state, rules set), some of which
// happen on the way of a request.
type events struct {
	log *slog.Logger

	mu        sync.Mutex
	seq       uint64
	kept      []Event // the latest events: grows to 128, then a ring
	listeners []*notify.Queue[Event]
	logQueue  *notify.Queue[Event] // logs off the way of requests

	dropped atomic.Int64 // by listeners removed

	// For "resources_full": what happened since the last one, and when that was.
	evicted, overflowed atomic.Int64
	lastFull            atomic.Int64
}

func newEvents(log *slog.Logger) *events {
	e := &events{log: log}
	e.lastFull.Store(-fullEvery)
	if log.Enabled(context.Background(), slog.LevelError) {
		e.logQueue = notify.New(e.write, bounds.EventQueue)
	}
	return e
}

// record numbers ev, keeps it, and queues it for the log and the
// listeners.
func (e *events) record(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	ev.Seq = e.seq
	if len(e.kept) < bounds.KeptEvents {
		e.kept = append(e.kept, ev)
	} else {
		e.kept[(ev.Seq-1)%bounds.KeptEvents] = ev
	}
	if e.logQueue != nil {
		e.logQueue.Push(ev)
	}
	for _, l := range e.listeners {
		l.Push(ev)
	}
}

// write logs ev.
func (e *events) write(ev Event) {
	attrs := []slog.Attr{slog.String("event", ev.Kind), slog.Uint64("seq", ev.Seq)}
	switch ev.Kind {
	case breakerChanged:
		attrs = append(attrs, slog.String("resource", ev.Resource), slog.String("rule", ev.Rule),
			slog.String("from", ev.Breaker.From.String()), slog.String("to", ev.Breaker.To.String()),
			slog.String("cause", cause(ev.Breaker)))
		if ev.Breaker.From == breaker.Closed && ev.Breaker.To == breaker.Open {
			c := ev.Breaker.Stats
			attrs = append(attrs, slog.Int64("requests", c.Requests), slog.Int64("failures", c.Failures), slog.Int64("slow", c.Slow))
		}
	case rulesChanged, rulesUnused:
		attrs = append(attrs, slog.Int("changes", len(ev.Changes)+ev.MoreChanges))
	case clusterChanged:
		attrs = append(attrs, slog.Bool("healthy", ev.Cluster.Healthy))
	case resourcesFull:
		attrs = append(attrs, slog.Int64("evicted", ev.Evicted), slog.Int64("overflowed", ev.Overflowed))
	}
	e.log.LogAttrs(context.Background(), ev.level(), "slidegate: "+ev.String(), attrs...)
}

// listen registers f; the returned func removes it.
func (e *events) listen(f func(Event)) func() {
	q := notify.New(f, bounds.EventQueue)
	e.mu.Lock()
	e.listeners = append(e.listeners, q)
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			for i, l := range e.listeners {
				if l == q {
					e.listeners = append(e.listeners[:i:i], e.listeners[i+1:]...)
					break
				}
			}
			q.Close()
			e.dropped.Add(q.Dropped())
		})
	}
}

// latest returns the events kept, oldest first.
func (e *events) latest() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := min(e.seq, bounds.KeptEvents)
	out := make([]Event, 0, n)
	for s := e.seq - n + 1; s <= e.seq; s++ {
		out = append(out, e.kept[(s-1)%bounds.KeptEvents])
	}
	return out
}

// droppedCount returns the events dropped by listeners, removed or not.
func (e *events) droppedCount() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.dropped.Load()
	for _, l := range e.listeners {
		n += l.Dropped()
	}
	return n
}

// full notes that the resource table had no room at time now: it evicted
// evicted resources, and counted the request as OtherResource if
// overflowed. It records a "resources_full" event at most once a second.
func (e *events) full(now, evicted int64, overflowed bool) {
	e.evicted.Add(evicted)
	if overflowed {
		e.overflowed.Add(1)
	}
	last := e.lastFull.Load()
	if now-last < fullEvery || !e.lastFull.CompareAndSwap(last, now) {
		return
	}
	e.record(Event{At: now, Kind: resourcesFull, Evicted: e.evicted.Swap(0), Overflowed: e.overflowed.Swap(0)})
}

// reportRefused records a "rules_refused" event for rules that came from
// source (a file's path, "etcd:/slidegate/rules") and were refused before
// they reached SetRules, because err (a *RulesError) found problems in
// them: rulefile.Follow reports so the documents it refuses, through
// hooks.ReportRefused. SetRules records the rules it refuses itself. A nil
// err records nothing.
func (g *Guard) reportRefused(source string, err error) {
	if err != nil {
		g.events.record(Event{At: g.clock.Now(), Kind: rulesRefused, Err: err, Source: textcut.Cut(source, bounds.MaxNameLength)})
	}
}

func init() {
	hooks.ReportRefused = func(g any, source string, err error) { g.(*Guard).reportRefused(source, err) }
}

// breakerChanged records the change of state of a circuit of the rules in
// force. It is the circuits' OnTransition: it runs with the circuit's lock
// held, so it only records.
func (g *Guard) breakerChanged(c *breaker.Circuit, t breaker.Transition) {
	s := g.snap.Load()
	for i, b := range s.breakers {
		if cb, ok := b.b.(*breaker.Circuit); ok && cb == c {
			g.events.record(Event{At: t.At, Kind: breakerChanged, Resource: s.kept.breakers[i].resource, Rule: s.kept.breakerName(i), Breaker: t})
			return
		}
	}
	// A circuit of rules no longer in force, ending what it let in: no
	// rule of the rules in force to tell of.
}

// ruleChanges returns what changes from the rules before to those after,
// the fields that changed listed for the first 64 changes
// (those an event keeps). Rules are compared by their keys (see ruleKey),
// so that a reload of many rules costs little: only changed rules are told
// field by field.
func ruleChanges(before, after Rules) []RuleChange {
	b, a := keep(before), keep(after)
	bn, an := &named{}, &named{}
	bn.flows, bn.breakers = before.names()
	an.flows, an.breakers = after.names()
	out, _ := changesOf(&b, &a, bn, an, math.MaxInt)
	return out
}

// changesOf is ruleChanges of the rules kept before and after, named
// beforeNames and afterNames, listing at most max changes: it returns
// those and how many there are in all. A rule kept as its resource and
// limits alone (keptFlow, keptBreaker) is compared by those, without
// writing its key: such rules are the same rule when they are equal.
func changesOf(before, after *keptRules, beforeNames, afterNames *named, max int) (out []RuleChange, all int) {
	type id struct {
		resource, name string
		breaker        bool
	}
	add := func(c RuleChange) {
		if len(out) < max {
			out = append(out, c)
		}
		all++
	}
	oldFlows, oldBreakers := beforeNames.flows, beforeNames.breakers
	newFlows, newBreakers := afterNames.flows, afterNames.breakers
	nf := len(before.flow)
	old := make(map[id]int, nf+len(before.breakers)) // flow i at i, breaker i at nf+i
	for i := range before.flow {
		old[id{before.flow[i].resource, oldFlows[i], false}] = i
	}
	for i := range before.breakers {
		old[id{before.breakers[i].resource, oldBreakers[i], true}] = nf + i
	}
	kept := make([]bool, nf+len(before.breakers))
	sameShadow := before.shadow == after.shadow
	var ka, kb []byte
	for i := range after.flow {
		k := id{after.flow[i].resource, newFlows[i], false}
		j, ok := old[k]
		if !ok {
			add(RuleChange{Resource: k.resource, Rule: k.name, Change: "added"})
			continue
		}
		kept[j] = true
		if x, y := &before.flow[j], &after.flow[i]; sameShadow && x.whole == nil && y.whole == nil {
			if x.limit == y.limit {
				continue
			}
			if len(out) >= max {
				all++ // changed: only the limit differs
				continue
			}
		}
		was, is := before.flowAt(j), after.flowAt(i)
		a, b := was.normal(), is.normal()
		a.Shadow, b.Shadow = was.Shadow || before.shadow, is.Shadow || after.shadow
		ka, kb = a.appendKey(ka[:0], false), b.appendKey(kb[:0], false)
		if string(ka) == string(kb) && sameOverrides(a.Overrides, b.Overrides) {
			continue
		}
		c := RuleChange{Resource: k.resource, Rule: k.name, Change: "changed"}
		if len(out) < bounds.MaxEventChanges {
			c.Fields = changedFields(fieldsOf(a), fieldsOf(b), overrideChanges(a.Overrides, b.Overrides))
		}
		add(c)
	}
	for i := range after.breakers {
		k := id{after.breakers[i].resource, newBreakers[i], true}
		j, ok := old[k]
		if !ok {
			add(RuleChange{Resource: k.resource, Rule: k.name, Breaker: true, Change: "added"})
			continue
		}
		kept[j] = true
		if x, y := &before.breakers[j-nf], &after.breakers[i]; sameShadow && x.whole == nil && y.whole == nil {
			if x.strategy == y.strategy && x.threshold == y.threshold && x.count == y.count {
				continue
			}
			if len(out) >= max {
				all++
				continue
			}
		}
		was, is := before.breakerAt(j-nf), after.breakerAt(i)
		a, b := was.normal(), is.normal()
		a.Shadow, b.Shadow = was.Shadow || before.shadow, is.Shadow || after.shadow
		ka, kb = a.appendKey(ka[:0]), b.appendKey(kb[:0])
		if string(ka) == string(kb) {
			continue
		}
		c := RuleChange{Resource: k.resource, Rule: k.name, Breaker: true, Change: "changed"}
		if len(out) < bounds.MaxEventChanges {
			c.Fields = changedFields(fieldsOf(a), fieldsOf(b), nil)
		}
		add(c)
	}
	for i := range before.flow {
		if !kept[i] {
			add(RuleChange{Resource: before.flow[i].resource, Rule: oldFlows[i], Change: "removed"})
		}
	}
	for i := range before.breakers {
		if !kept[nf+i] {
			add(RuleChange{Resource: before.breakers[i].resource, Rule: oldBreakers[i], Breaker: true, Change: "removed"})
		}
	}
	return out, all
}

// Bounds of what a RuleChange says, so that an event, its log line and
// its dashboard row stay small whatever the rules hold (an overrides map
// may have 10,000 keys of 256 bytes).
const (
	maxChangedFields = 8   // fields, or keys of a map, listed per change
	maxFieldValue    = 100 // bytes of a value, before and after
	maxShownOverride = 64  // bytes of an override's key
)

// durationType is the type of the fields that files write as "500ms".
var durationType = reflect.TypeFor[Duration]()

// fieldsOf returns the fields of a rule (a FlowRule or a BreakerRule) as
// its JSON writes them, name → value, leaving out its overrides (see
// overrideChanges) and the fields JSON would leave out.
func fieldsOf(rule any) map[string]string {
	v := reflect.ValueOf(rule)
	t := v.Type()
	out := make(map[string]string, t.NumField())
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fv := v.Field(i)
		if name == "" || name == "-" || fv.Kind() == reflect.Map || opts == "omitempty" && fv.IsZero() {
			continue
		}
		out[name] = valueText(fv)
	}
	return out
}

// valueText writes a field's value as its JSON does, a string without its
// quotes.
func valueText(v reflect.Value) string {
	if v.Type() == durationType {
		return Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "none"
		}
		return valueText(v.Elem())
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		format := byte('f')
		if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e' // as encoding/json writes it
		}
		return strconv.FormatFloat(f, format, -1, 64)
	}
	return fmt.Sprint(v.Interface())
}

// overrideChanges lists how the overrides changed, in the order of their
// keys: the count first ("overrides: 1 added, 20 changed"), then each key
// added, removed or changed (see shownKey), with its limit
// before and after, "none" where it has no override (which is not a limit
// of 0: that blocks the key). It returns nil if they are the same.
func overrideChanges(before, after map[string]int64) []string {
	if sameOverrides(before, after) {
		return nil
	}
	var keys []string
	added, removed, changed := 0, 0, 0
	for k, v := range after {
		if w, ok := before[k]; !ok {
			keys, added = append(keys, k), added+1
		} else if w != v {
			keys, changed = append(keys, k), changed+1
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys, removed = append(keys, k), removed+1
		}
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{added, "added"}, {removed, "removed"}, {changed, "changed"}} {
		if p.n > 0 {
			parts = append(parts, strconv.Itoa(p.n)+" "+p.what)
		}
	}
	out := make([]string, 0, 1+min(len(keys), maxChangedFields))
	out = append(out, "overrides: "+strings.Join(parts, ", "))
	// Only as many keys as a change lists need their order.
	slices.Sort(keys)
	limit := func(m map[string]int64, k string) string {
		if v, ok := m[k]; ok {
			return strconv.FormatInt(v, 10)
		}
		return "none"
	}
	for _, k := range keys {
		out = append(out, "overrides["+shownKey(k)+"]: "+limit(before, k)+" → "+limit(after, k))
	}
	return out
}

// shownKey quotes an override's key for a change, a key longer than
// maxShownOverride bytes by its first and last bytes, so that keys that
// differ only at their end (a prefix and a number) still read apart:
// "tenant-0000…"…"…0017".
func shownKey(k string) string {
	if len(k) <= maxShownOverride {
		return strconv.Quote(k)
	}
	head, tail := maxShownOverride*3/4, len(k)-maxShownOverride/4
	for head > 0 && !utf8.RuneStart(k[head]) {
		head--
	}
	for tail < len(k) && !utf8.RuneStart(k[tail]) {
		tail++
	}
	return strconv.Quote(k[:head]) + "…" + strconv.Quote(k[tail:])
}

// changedFields lists the fields whose values differ, in the order of their
// names, then the lines of more (overrideChanges), at most maxChangedFields
// lines in all and then how many more: "limit: 100 → 200". A field one side
// leaves out is unset: false where the other side is a boolean, 0 where a
// number, "none" otherwise. Values are cut to maxFieldValue bytes.
func changedFields(before, after map[string]string, more []string) []string {
	var names []string
	for k, v := range after {
		if w, ok := before[k]; !ok || w != v {
			names = append(names, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	out := make([]string, 0, min(len(names)+len(more), maxChangedFields)+1)
	for _, k := range names {
		b, ok := before[k]
		if !ok {
			b = unset(after[k])
		}
		a, ok := after[k]
		if !ok {
			a = unset(before[k])
		}
		out = append(out, textcut.Cut(k, maxFieldValue)+": "+textcut.Cut(b, maxFieldValue)+" → "+textcut.Cut(a, maxFieldValue))
	}
	out = append(out, more...)
	if n := len(out) - maxChangedFields; n > 0 {
		out = append(out[:maxChangedFields], fmt.Sprintf("and %d more", n))
	}
	return out
}

// unset returns how a field left out reads, beside its value v on the
// other side.
func unset(v string) string {
	switch {
	case v == "true" || v == "false":
		return "false"
	case v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && isNumber(v):
		return "0"
	}
	return "none"
}

// isNumber reports whether v is a number as valueText writes one.
func isNumber(v string) bool {
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}

// cause says in words why a circuit changed state, for the log: the change
// itself says it, but for a probe that timed out rather than failed.
func cause(t breaker.Transition) string {
	switch {
	case t.From == breaker.Closed:
		return "tripped"
	case t.From == breaker.Open:
		return "open timeout passed"
	case t.To == breaker.Closed:
		return "probes succeeded"
	case t.ProbeTimedOut:
		return "probe timed out"
	}
	return "probe failed"
}
