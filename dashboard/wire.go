package dashboard

import (
	"math"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/rulekind"
)

// The JSON the API serves. Times are Unix seconds (with milliseconds),
// durations seconds, rates requests per second. Field names are those of
// slidegate.Rules' JSON: lower case with underscores.

// snapshotJSON is api/snapshot, and the "snapshot" event.
type snapshotJSON struct {
	Seq       uint64          `json:"seq"`      // samples taken so far; events carry the next ones
	Time      float64         `json:"time"`     // of the latest sample
	Interval  float64         `json:"interval"` // seconds between samples; 0: on demand (Sample)
	History   int             `json:"history"`  // points kept per resource
	TopKeys   int             `json:"top_keys"` // keys in each list of a resource's top keys (WithTopKeys)
	Editing   bool            `json:"editing"`  // PUT api/rules is allowed
	Inbound   resourceJSON    `json:"inbound"`
	Resources []resourceJSON  `json:"resources"`
	Breakers  []breakerJSON   `json:"breakers"`
	Overload  []overloadJSON  `json:"overload"`
	Retries   []retryJSON     `json:"retries"`
	Rules     slidegate.Rules `json:"rules"` // every rule named (Rules.Named)
	// Events are the latest of the guard's events the dashboard has seen,
	// oldest first, at most 128; empty, not null, without
	// any.
	Events        []guardEventJSON `json:"events"`
	DroppedEvents int64            `json:"dropped_events"`    // Guard.DroppedEvents
	Cluster       *clusterJSON     `json:"cluster,omitempty"` // absent without a cluster that reports its health
}

// eventJSON is a "sample" event: the new point of every resource.
type eventJSON struct {
	Seq       uint64           `json:"seq"`
	Time      float64          `json:"time"`
	Inbound   resourceJSON     `json:"inbound"`
	Resources []resourceJSON   `json:"resources"` // all of them: those missing are gone
	Breakers  []breakerJSON    `json:"breakers"`
	Overload  []overloadJSON   `json:"overload"`
	Retries   []retryJSON      `json:"retries"`
	Rules     *slidegate.Rules `json:"rules,omitempty"` // only when they changed; every rule named
	// Events are the guard's events seen first by this sample, oldest
	// first; absent without any.
	Events        []guardEventJSON `json:"events,omitempty"`
	DroppedEvents int64            `json:"dropped_events"`
	Cluster       *clusterJSON     `json:"cluster,omitempty"`
}

// resourceJSON is a resource: in a snapshot with its history, in an event
// with its new point.
type resourceJSON struct {
	Name    string       `json:"name"`
	Breaker string       `json:"breaker,omitempty"` // its breakers' worst state: "closed", "half-open", "open"
	Stats   statsJSON    `json:"stats"`             // slidegate.ResourceStats: the last 10 s, and the totals
	History *historyJSON `json:"history,omitempty"`
	Partial bool         `json:"partial,omitempty"` // the history is only the newest points (WithSnapshotPoints)
	Point   *pointJSON   `json:"point,omitempty"`
	Keys    *keysJSON    `json:"keys,omitempty"` // a resource with per-key rules: its top keys
}

// keysJSON is the top keys of a resource with per-key rules, as of the
// sample: the WithTopKeys keys with the most requests allowed and those
// with the most blocked, together, busiest first. It is made anew each
// sample and never changed, so that a snapshot may encode it after the
// sampler has moved on.
type keysJSON struct {
	Interval float64   `json:"interval"` // seconds: the interval of the resource's first per-key rule
	Top      []keyJSON `json:"top"`      // empty, not null, while no key is tracked
}

// keyJSON is one key: the requests allowed in the last interval of the
// resource's first per-key rule, and those the per-key rules blocked in
// that interval and the one before (slidegate.KeyStat).
type keyJSON struct {
	Key     string `json:"key"` // at most 64 bytes; any text a client sent
	Allowed int64  `json:"allowed"`
	Blocked int64  `json:"blocked"`
}

// resourceHistoryJSON is api/history: a resource with its whole history,
// as of sample seq.
type resourceHistoryJSON struct {
	Seq uint64 `json:"seq"`
	resourceJSON
}

// historyJSON is a resource's points, oldest first, column by column (as
// charts want them): element i of every slice is point i.
type historyJSON struct {
	T           []float64 `json:"t"`
	AllowedRate []float64 `json:"allowed_rate"`
	BlockedRate []float64 `json:"blocked_rate"`
	FailedRate  []float64 `json:"failed_rate"`
	InFlight    []int64   `json:"in_flight"`
	P50         []float64 `json:"p50"`
	P99         []float64 `json:"p99"`
	Breaker     []string  `json:"breaker"`
	// WouldBlockRate is the requests per second that shadow rules would
	// have blocked, and let through (among AllowedRate).
	WouldBlockRate []float32 `json:"would_block_rate"`
}

// pointJSON is one sample of a resource: the requests allowed, blocked and
// failed per second since the previous sample, and the rest as of the
// sample.
type pointJSON struct {
	T           float64 `json:"t"`
	AllowedRate float64 `json:"allowed_rate"`
	BlockedRate float64 `json:"blocked_rate"`
	FailedRate  float64 `json:"failed_rate"`
	InFlight    int64   `json:"in_flight"`
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	Breaker     string  `json:"breaker,omitempty"`
	// WouldBlockRate is the requests per second that shadow rules would
	// have blocked, and let through (among AllowedRate); a float32, to 7
	// significant digits, as the dashboard keeps it.
	WouldBlockRate float32 `json:"would_block_rate"`
}

// statsJSON is a slidegate.ResourceStats: the requests allowed and blocked,
// and of the allowed ones those that succeeded and failed, in the last 10
// seconds; their response times; and the totals.
type statsJSON struct {
	Allowed   int64      `json:"allowed"`
	Blocked   int64      `json:"blocked"`
	Succeeded int64      `json:"succeeded"`
	Failed    int64      `json:"failed"`
	AvgRT     float64    `json:"avg_rt"`
	P50       float64    `json:"p50"`
	P90       float64    `json:"p90"`
	P99       float64    `json:"p99"`
	MaxRT     float64    `json:"max_rt"`
	InFlight  int64      `json:"in_flight"`
	Totals    totalsJSON `json:"totals"`
}

// totalsJSON is a slidegate.Totals, the blocked requests summed over the
// reasons (Totals.Blocked), and so are the requests shadow rules would have
// blocked (Totals.WouldBlock).
type totalsJSON struct {
	Allowed    int64   `json:"allowed"`
	Blocked    int64   `json:"blocked"`
	Succeeded  int64   `json:"succeeded"`
	Failed     int64   `json:"failed"`
	RT         float64 `json:"rt"`
	WouldBlock int64   `json:"would_block"` // among allowed: let through by shadow rules that would have blocked them
}

// breakerJSON is a slidegate.BreakerStatus. Its counts are of the breaker's
// interval: the requests it counted an outcome of, those that succeeded,
// failed and were slow, and those it blocked.
type breakerJSON struct {
	Resource       string  `json:"resource"`
	Rule           string  `json:"rule"`
	Strategy       string  `json:"strategy"`
	State          string  `json:"state"`
	BlockRatio     float64 `json:"block_ratio"` // the share of requests it blocks now, 0 to 1
	Requests       int64   `json:"requests"`
	Succeeded      int64   `json:"succeeded"`
	Failed         int64   `json:"failed"`
	Slow           int64   `json:"slow"`
	Blocked        int64   `json:"blocked"`
	ProbesInFlight int     `json:"probes_in_flight"`
	RetryAfter     float64 `json:"retry_after"`
	Shadow         bool    `json:"shadow,omitempty"` // in shadow: it blocks nothing, and no resource shows its state
}

// overloadJSON is a slidegate.OverloadStatus: a shed or adaptive rule in
// force and what it has learnt.
type overloadJSON struct {
	Resource string `json:"resource"` // "(inbound)" for a rule on all the inbound traffic
	Rule     string `json:"rule"`
	Type     string `json:"type"` // "shed" or "adaptive"
	// Limit is the most requests in flight the rule allows now
	// (slidegate.OverloadStatus.Cap): an adaptive rule's limit; a shed
	// rule's bound while it sheds, twice it while the CPU is warm or
	// without a CPU signal, -1 (no cap) while the CPU is cool. Learnt is
	// what the rule learnt (OverloadStatus.Limit): a shed rule's bound, -1
	// until it has one, or an adaptive rule's limit.
	Limit    int64   `json:"limit"`
	Learnt   int64   `json:"learnt"`
	InFlight int64   `json:"in_flight"`
	Shedding bool    `json:"shedding"` // a shed rule sheds now
	CPU      float64 `json:"cpu"`      // the CPU usage a shed rule read, 0 to 1; -1: none
	Baseline float64 `json:"baseline"` // an adaptive rule's least response time, seconds; 0: none yet
}

// retryJSON is a retry budget (WithRetryBudget): what it counted.
type retryJSON struct {
	Budget     string `json:"budget"`      // the name it was given, at most 256 bytes
	Requests   int64  `json:"requests"`    // original requests counted in its interval
	Retries    int64  `json:"retries"`     // retries it allowed in its interval
	Blocked    int64  `json:"blocked"`     // retries it blocked for want of budget, since it was made
	NotRetried int64  `json:"not_retried"` // failed attempts it did not retry (a breaker's probe, or an open breaker), since it was made
}

// problemJSON is a slidegate.Problem.
type problemJSON struct {
	Place   string `json:"place"`
	Field   string `json:"field"`
	Reason  string `json:"reason"`
	Message string `json:"message"` // all of it in words
}

// unix returns the wall time of the clock reading at, in Unix seconds
// rounded to the millisecond.
func (d *Dashboard) unix(at int64) float64 {
	ns := d.wallBase.UnixNano() + (at - d.monoBase)
	return float64(ns/int64(time.Millisecond)) / 1e3
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func statsOf(st slidegate.ResourceStats) statsJSON {
	return statsJSON{
		Allowed: st.Allowed, Blocked: st.Blocked, Succeeded: st.Succeeded, Failed: st.Failed,
		AvgRT: seconds(st.AvgRT), P50: seconds(st.P50), P90: seconds(st.P90), P99: seconds(st.P99), MaxRT: seconds(st.MaxRT),
		InFlight: st.InFlight,
		Totals: totalsJSON{
			Allowed: st.Totals.Allowed, Blocked: st.Totals.Blocked(), Succeeded: st.Totals.Succeeded, Failed: st.Totals.Failed,
			RT: seconds(st.Totals.RT), WouldBlock: st.Totals.WouldBlock(),
		},
	}
}

func breakersOf(bs []slidegate.BreakerStatus) []breakerJSON {
	out := make([]breakerJSON, len(bs))
	for i, b := range bs {
		out[i] = breakerJSON{
			Resource: b.Resource, Rule: b.Rule, Strategy: string(b.Strategy),
			State:      stateOf(b.State).String(),
			BlockRatio: finite(b.BlockRatio),
			Requests:   b.Requests, Succeeded: b.Successes, Failed: b.Failures, Slow: b.Slow, Blocked: b.Blocked,
			ProbesInFlight: b.ProbesInFlight,
			RetryAfter:     seconds(b.RetryAfter),
			Shadow:         b.Shadow,
		}
	}
	return out
}

func overloadOf(os []slidegate.OverloadStatus) []overloadJSON {
	out := make([]overloadJSON, len(os))
	for i, o := range os {
		// Only a shed rule reads the CPU. A reading JSON cannot write is
		// a WithCPU at fault: no reading, rather than a frame that cannot
		// be encoded.
		cpu := o.CPU
		if !rulekind.Of(string(o.Type)).Sheds || math.IsNaN(cpu) || math.IsInf(cpu, 0) {
			cpu = -1
		}
		out[i] = overloadJSON{
			Resource: o.Resource, Rule: o.Rule, Type: string(o.Type),
			Limit: o.Cap, Learnt: o.Limit, InFlight: o.InFlight, Shedding: o.Shedding, CPU: cpu,
			Baseline: seconds(o.Baseline),
		}
	}
	return out
}

// finite returns x, or 0 if JSON cannot write it.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

func (d *Dashboard) pointOf(p point) pointJSON {
	return pointJSON{
		T: d.unix(p.at), AllowedRate: p.allowed, BlockedRate: p.blocked, FailedRate: p.failed,
		InFlight: p.inFlight, P50: seconds(p.p50), P99: seconds(p.p99), Breaker: p.breaker.String(),
		WouldBlockRate: p.wouldBlock,
	}
}

// resourceOf describes s, without its points.
func (d *Dashboard) resourceOf(s *series) resourceJSON {
	return resourceJSON{Name: s.name, Breaker: s.breaker.String(), Stats: statsOf(s.stats), Keys: s.keys}
}

// withHistory describes s with its newest n points, marked partial if it
// has more.
func (d *Dashboard) withHistory(s *series, n int) resourceJSON {
	r := d.resourceOf(s)
	n = min(n, len(s.ring))
	h := &historyJSON{
		T: make([]float64, 0, n), AllowedRate: make([]float64, 0, n), BlockedRate: make([]float64, 0, n),
		FailedRate: make([]float64, 0, n), InFlight: make([]int64, 0, n),
		P50: make([]float64, 0, n), P99: make([]float64, 0, n), Breaker: make([]string, 0, n),
		WouldBlockRate: make([]float32, 0, n),
	}
	s.newest(n, func(p point) {
		h.T = append(h.T, d.unix(p.at))
		h.AllowedRate = append(h.AllowedRate, p.allowed)
		h.BlockedRate = append(h.BlockedRate, p.blocked)
		h.FailedRate = append(h.FailedRate, p.failed)
		h.InFlight = append(h.InFlight, p.inFlight)
		h.P50 = append(h.P50, seconds(p.p50))
		h.P99 = append(h.P99, seconds(p.p99))
		h.Breaker = append(h.Breaker, p.breaker.String())
		h.WouldBlockRate = append(h.WouldBlockRate, p.wouldBlock)
	})
	r.History = h
	r.Partial = n < len(s.ring)
	return r
}

// withPoint describes s with its newest point, if the last sample added
// one.
func (d *Dashboard) withPoint(s *series) resourceJSON {
	r := d.resourceOf(s)
	if p, ok := s.lastPoint(); ok && s.fresh {
		pj := d.pointOf(p)
		r.Point = &pj
	}
	return r
}

// snapshotHistory returns how many of each resource's newest points a
// snapshot carries: WithSnapshotPoints shared among the resources, at least
// one, at most the history. d.sampling is held.
func (d *Dashboard) snapshotHistory() int {
	return min(max(d.snapshotPoints/max(len(d.series), 1), 1), d.history)
}

// snapshot describes everything the dashboard holds, each resource with as
// much history as snapshotHistory allows (the inbound traffic, one series,
// with all of it). d.sampling is held.
func (d *Dashboard) snapshot() snapshotJSON {
	snap := snapshotJSON{
		Seq:       d.seq,
		Time:      d.unix(d.last),
		Interval:  d.interval.Seconds(),
		History:   d.history,
		TopKeys:   d.topKeys,
		Editing:   d.token != nil,
		Inbound:   d.withHistory(d.inbound, d.history),
		Resources: make([]resourceJSON, 0, len(d.series)),
		Breakers:  breakersOf(d.breakers),
		Overload:  overloadOf(d.overload),
		Retries:   d.retries,
		Rules:     d.rules,
		Events:    d.timeline,

		DroppedEvents: d.dropped,
		Cluster:       d.cluster,
	}
	if snap.Events == nil {
		snap.Events = []guardEventJSON{}
	}
	n := d.snapshotHistory()
	for _, s := range d.sorted() {
		snap.Resources = append(snap.Resources, d.withHistory(s, n))
	}
	return snap
}

// event describes the latest sample. d.sampling is held.
func (d *Dashboard) event(withRules bool) eventJSON {
	ev := eventJSON{
		Seq:       d.seq,
		Time:      d.unix(d.last),
		Inbound:   d.withPoint(d.inbound),
		Resources: make([]resourceJSON, 0, len(d.series)),
		Breakers:  breakersOf(d.breakers),
		Overload:  overloadOf(d.overload),
		Retries:   d.retries,
		Events:    d.newEvents,

		DroppedEvents: d.dropped,
		Cluster:       d.cluster,
	}
	if withRules {
		r := d.rules
		ev.Rules = &r
	}
	for _, s := range d.sorted() {
		ev.Resources = append(ev.Resources, d.withPoint(s))
	}
	return ev
}
