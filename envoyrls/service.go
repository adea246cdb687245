package envoyrls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/internal/clusterkeys"
	"github.com/slidegate/slidegate/internal/textcut"
	"github.com/slidegate/slidegate/redisflow"
)

// Settings configure a [Service]. Every zero field takes its default.
type Settings struct {
	// KeyMemory is the heap, in bytes, that the per-key windows of every
	// rule may hold together (default 64 MiB). Past it, keys are counted
	// in sketches that may refuse them early, never late.
	KeyMemory int64
	// ShadowMode answers OK to every request, as envoyproxy/ratelimit's
	// SHADOW_MODE does. Each descriptor's status still tells its decision.
	ShadowMode bool
	// Headers adds RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
	// to each answer, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED
	// does, for Envoy to pass to the client. They tell the descriptor with
	// the least remaining, or the last one over its limit. The reset is in
	// whole seconds, rounded up.
	Headers bool
	// Logger receives the reloads and the configs refused (default
	// slog.Default()).
	Logger *slog.Logger
	// Clock is the clock the windows read (default clock.System).
	Clock clock.Clock
	// Cluster, if not nil, keeps the windows in Redis through it, shared
	// by every service given a cluster over the same Redis and prefix: at
	// most requests_per_unit in any window of one unit across them all.
	// A request's windows are counted together, all or none, in one
	// round trip. While Redis is down, the cluster's fallback decides
	// (docs/envoyrls.md). KeyMemory then bounds nothing: the fallback's
	// windows are redisflow's, each limit's within 64 MiB of its own.
	Cluster *redisflow.Cluster
}

// A Service answers Envoy's ShouldRateLimit from a [Config], with exact
// sliding windows: at most requests_per_unit in any window of one unit,
// wherever it starts, for each descriptor's key. docs/envoyrls.md says how
// that differs from envoyproxy/ratelimit's fixed windows. A Service is safe
// for concurrent use.
type Service struct {
	mem     *flow.KeyMemory
	memMax  int64
	clock   clock.Clock
	log     *slog.Logger
	shadow  bool
	headers bool
	windows backend

	setMu  sync.Mutex // serialises SetConfig
	state  atomic.Pointer[state]
	shapes shapes
	stats  statsBook
	reads  atomic.Int64 // how many times Follow read the directory after the first
}

// A state is a config with the limiter of each of its rules.
type state struct {
	cfg    *Config
	series map[*rule]*series
	lim    map[*rule]window // none for rules that allow nothing or everything
	prev   map[*rule][]prevWindow
}

// maxPrev is how many earlier windows of a rule count, the newest: as
// many changes of its limit within one unit.
const maxPrev = 8

// A prevWindow is a window a rule had before a reload changed its limit
// or unit. Until its hits have left it, they count against the new limit
// too: what a key used there is taken from what it has left.
type prevWindow struct {
	w     window
	limit int64
	until int64
}

// New returns a Service of the given settings with an empty config: every
// descriptor is allowed until [Service.SetConfig].
func New(s Settings) (*Service, error) {
	if s.KeyMemory == 0 {
		s.KeyMemory = 64 << 20
	}
	mem, err := flow.NewKeyMemory(s.KeyMemory)
	if err != nil {
		return nil, fmt.Errorf("envoyrls: key memory: %w", err)
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	svc := &Service{mem: mem, memMax: s.KeyMemory, clock: s.Clock, log: s.Logger, shadow: s.ShadowMode, headers: s.Headers}
	svc.windows = newLocal(mem, s.Clock)
	if s.Cluster != nil {
		svc.windows = &shared{c: s.Cluster}
	}
	svc.shapes.m = map[shape]*shapeWindow{}
	svc.state.Store(&state{cfg: &Config{domains: map[string]*level{}}, lim: map[*rule]window{}, series: map[*rule]*series{}})
	return svc, nil
}

// SetConfig puts c in force. A rule keeps what its keys used. One of the
// same limit and unit keeps its window. One whose limit or unit changed
// takes a new window. What its keys used in the old one then counts
// against the new limit, until it leaves the old window.
func (s *Service) SetConfig(c *Config) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	need := map[shape]bool{}
	walk(c, func(r *rule) {
		if !r.unlimited && r.limit > 0 {
			need[shape{r.limit, unitLength(r.unit)}] = true
		}
	})
	ws, err := s.shapes.pin(s.windows, s.clock.Now(), need)
	if err != nil {
		return err
	}
	old := s.state.Load()
	byID := make(map[string]*rule, len(old.lim))
	for r := range old.lim {
		byID[r.id] = r
	}
	now := s.clock.Now()
	next := &state{cfg: c, lim: map[*rule]window{}, prev: map[*rule][]prevWindow{}, series: s.stats.rules(c)}
	walk(c, func(r *rule) {
		w := ws[shape{r.limit, unitLength(r.unit)}]
		if w == nil || r.unlimited {
			return
		}
		next.lim[r] = w
		o := byID[r.id]
		if o == nil {
			return
		}
		var prev []prevWindow
		if old.lim[o] != w {
			u := unitLength(o.unit)
			prev = append(prev, prevWindow{w: old.lim[o], limit: int64(o.limit), until: now + int64(u+u/windowBuckets)})
		}
		for _, p := range old.prev[o] {
			if p.until > now && p.w != w && len(prev) < maxPrev {
				prev = append(prev, p)
			}
		}
		if len(prev) > 0 {
			next.prev[r] = prev
		}
	})
	s.state.Store(next)
	return nil
}

// walk calls f for every rule of c.
func walk(c *Config, f func(*rule)) {
	var visit func(l *level)
	visit = func(l *level) {
		for _, n := range l.exact {
			if n.rule != nil {
				f(n.rule)
			}
			visit(&n.children)
		}
	}
	for _, l := range c.domains {
		visit(l)
	}
}

// Register registers the service's ShouldRateLimit with a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	rlsv3.RegisterRateLimitServiceServer(r, grpcService{s: s})
}

type grpcService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Service
}

func (g grpcService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return g.s.ShouldRateLimit(ctx, req)
}

// ShouldRateLimit decides a request now. Each descriptor finds its rule
// as envoyproxy/ratelimit finds it. Its hits (hits_addend) are checked
// against the rule's window for its key. If every enforced window has
// room, each descriptor that fits is counted. If one has not, the request
// is refused and counted in none. A request that breaks a bound (no
// domain, no descriptors, too many, too long) gets an InvalidArgument
// status naming the field.
func (s *Service) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return s.shouldRateLimitAt(s.clock.Now(), req)
}

// windowBuckets is how many buckets divide each window, flow's default: a
// request counted leaves its window between one unit and one unit and a
// bucket later.
const windowBuckets = 20

// An item is what a request's descriptor asks and what it was answered.
type item struct {
	rule      *rule
	answer    *rlsv3.RateLimitResponse_RateLimit // current_limit
	unit      time.Duration
	lim       window // nil when the limit is 0
	prev      []prevWindow
	key       string
	hits      int64
	left      int64          // what the key's window had left before the request, less what it used in earlier windows
	raw       int64          // what the key's window had left
	need      int64          // the hits of this descriptor and those before it of the same key
	counted   *flow.Decision // a joint backend's count of the descriptor, decided with the others'
	fits      bool           // need <= left
	limited   bool
	unlimited bool
	shadow    bool
	quota     bool
}

// shouldRateLimitAt is ShouldRateLimit for a request arriving at time now,
// on the service's clock.
func (s *Service) shouldRateLimitAt(now int64, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.decide(now, req)
	switch {
	case err != nil:
		s.stats.invalid.Add(1)
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.stats.overLimit.Add(1)
	default:
		s.stats.requests.Add(1)
	}
	return resp, err
}

// decide is shouldRateLimitAt but for the service's counts of requests.
func (s *Service) decide(now int64, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	st := s.state.Load()
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	items := sc.itemsOf(len(req.Descriptors))
	_, reuse := s.windows.(*local) // local windows keep no key: its bytes may be reused
	dom := st.cfg.domains[req.Domain]
	var replaced map[string]bool
	for i, d := range req.Descriptors {
		it := &items[i]
		it.hits = hitsOf(req, d)
		if dom == nil {
			continue // an unknown domain has no limits, as in envoyproxy/ratelimit
		}
		if d.Limit != nil {
			k, answer, err := shapeOf(i, d.Limit)
			if err != nil {
				return nil, err
			}
			it.limited, it.unit, it.answer = true, k.interval, answer
			it.key = sc.key(reuse, req.Domain, d.Entries, nil)
			if k.limit == 0 {
				continue // allows nothing: no window
			}
			w, room, err := s.shapes.take(s.windows, now, k)
			switch {
			case err != nil:
				return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
			case !room:
				return nil, status.Errorf(codes.ResourceExhausted, "descriptors[%d].limit: more than %d distinct limits that no rule has are in use", i, maxLooseShapes)
			}
			it.lim = w
			continue
		}
		m := dom.find(d.Entries)
		r := m.rule
		if r == nil {
			continue
		}
		for _, x := range r.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[x] = true
		}
		if r.unlimited {
			it.unlimited = true
			continue
		}
		it.rule, it.limited, it.answer = r, true, r.answer
		it.unit, it.lim = unitLength(r.unit), st.lim[r]
		it.prev = st.prev[r]
		it.shadow, it.quota = r.shadow, r.quota
		it.key = sc.key(reuse, req.Domain, d.Entries, m.share)
	}
	for i := range items {
		it := &items[i]
		if it.rule != nil && it.rule.name != "" && replaced[it.rule.name] {
			*it = item{hits: it.hits}
		}
	}

	// First what each window has left, counting nothing; then, if the
	// request is served, count it in each window it fits. A joint backend
	// reads what is left and counts in one step: the request as if every
	// descriptor fits, all or none (see countAtOnce).
	j, isJoint := s.windows.(joint)
	read := isJoint && s.countAtOnce(j, now, items)
	refused, quotas, quotasOver := false, 0, 0
	for i := range items {
		it := &items[i]
		if !it.limited {
			continue
		}
		if it.lim != nil && !(read && it.hits > 0) {
			it.left = it.lim.left(now, it.key)
			it.raw = it.left
			for _, p := range it.prev {
				if now < p.until {
					it.left = max(0, it.left-(p.limit-p.w.left(now, it.key)))
				}
			}
		}
		// A key asked twice in one request must fit both askings.
		it.need = it.hits
		for j := range items[:i] {
			if o := &items[j]; o.limited && o.lim == it.lim && o.key == it.key {
				it.need = clusterkeys.Sum(it.need, o.hits)
			}
		}
		fits := it.need <= it.left
		it.fits = fits
		if it.quota {
			quotas++
			if !fits {
				quotasOver++
			}
		} else if !fits && !it.shadow {
			refused = true
		}
	}
	if quotas > 0 && quotas == quotasOver {
		refused = true
	}
	served := !refused || s.shadow
	resp, sts, durs := newResponse(len(items))
	if refused && !s.shadow {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if isJoint && served && !countedAll(items) {
		served = s.countJointly(j, now, items)
	}
	for i := range items {
		it := &items[i]
		late := s.status(now, it, served || it.counted != nil, &sts[i], &durs[i])
		if late && !it.shadow && !it.quota && !s.shadow {
			// Another request took the room between the check and the
			// count: refused, the descriptors before it staying counted.
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if s.headers {
		resp.ResponseHeadersToAdd = headersOf(resp.Statuses, items)
	}
	for i := range items {
		if it := &items[i]; it.limited {
			if x := s.seriesOf(st, req, i, it); x != nil {
				x.count(it, resp.Statuses[i].Code == rlsv3.RateLimitResponse_OVER_LIMIT)
			}
		}
	}
	return resp, nil
}

// A oneAnswer is the answer to a request of one descriptor, made in one
// allocation: the messages Envoy's API asks for, side by side.
type oneAnswer struct {
	resp rlsv3.RateLimitResponse
	ptrs [1]*rlsv3.RateLimitResponse_DescriptorStatus
	sts  [1]rlsv3.RateLimitResponse_DescriptorStatus
	durs [1]durationpb.Duration
}

// newResponse returns an OK response with n statuses, and the statuses
// and durations they point to, to be filled in: in one allocation for one
// descriptor, in four for more.
func newResponse(n int) (*rlsv3.RateLimitResponse, []rlsv3.RateLimitResponse_DescriptorStatus, []durationpb.Duration) {
	var (
		resp *rlsv3.RateLimitResponse
		sts  []rlsv3.RateLimitResponse_DescriptorStatus
		durs []durationpb.Duration
	)
	if n == 1 {
		a := new(oneAnswer)
		resp, sts, durs = &a.resp, a.sts[:], a.durs[:]
		resp.Statuses = a.ptrs[:]
	} else {
		resp = new(rlsv3.RateLimitResponse)
		resp.Statuses = make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
		sts = make([]rlsv3.RateLimitResponse_DescriptorStatus, n)
		durs = make([]durationpb.Duration, n)
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	for i := range sts {
		resp.Statuses[i] = &sts[i]
	}
	return resp, sts, durs
}

// status decides one descriptor and answers it in st, the status of its
// answer, and, if it has a limit, in dur, st's duration_until_reset:
// counted if the request is served and it fits. It reports whether the
// descriptor fitted when checked and was refused when counted.
func (s *Service) status(now int64, it *item, served bool, st *rlsv3.RateLimitResponse_DescriptorStatus, dur *durationpb.Duration) bool {
	st.Code = rlsv3.RateLimitResponse_OK
	switch {
	case it.unlimited:
		st.LimitRemaining = math.MaxUint32
		return false
	case !it.limited:
		return false
	}
	st.CurrentLimit = it.answer
	st.DurationUntilReset = dur
	setDuration(dur, it.unit+it.unit/windowBuckets)
	if !served || !it.fits {
		// Not counted: the request is refused, or this descriptor is over
		// its limit (in shadow or quota mode, or with the global shadow
		// mode on, the request is served all the same).
		if it.fits {
			st.LimitRemaining = clampUint32(it.left)
			return false
		}
		if _, joint := s.windows.(joint); it.lim != nil && it.hits > it.raw && !joint {
			// Sure to be refused, and so counted nowhere: the window says
			// when the hits would fit.
			if d := it.lim.allow(now, it.key, it.hits); !d.Allowed && d.RetryAfter > 0 {
				setDuration(dur, d.RetryAfter)
			}
		}
		if !it.shadow {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		return false
	}
	if it.lim == nil || it.hits == 0 {
		st.LimitRemaining = clampUint32(it.left - it.need)
		return false
	}
	var d flow.Decision
	if it.counted != nil {
		d = *it.counted
	} else {
		d = it.lim.allow(now, it.key, it.hits)
	}
	if d.Allowed {
		st.LimitRemaining = clampUint32(it.left - it.need)
		return false
	}
	// Another request took the room between the check and the count.
	if d.RetryAfter > 0 {
		setDuration(dur, d.RetryAfter)
	}
	if !it.shadow {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return true
}

// setDuration sets dur to d, as durationpb.New(d) would make it.
func setDuration(dur *durationpb.Duration, d time.Duration) {
	dur.Seconds = int64(d / time.Second)
	dur.Nanos = int32(d % time.Second)
}

// countAtOnce counts, through a joint backend, every descriptor of the
// request with a window and hits, all or none, in the step that reads what
// each has left, and sets each one's left, and its counted if all were
// counted. The request is then decided as it would be had left been read
// first: every descriptor fitted, or, when one did not, none was counted
// and countJointly counts those that fit if the request is served. It
// reports whether it read, and does not when a descriptor's rule changed
// its limit within a unit: its previous window is read first.
func (s *Service) countAtOnce(j joint, now int64, items []item) bool {
	var asks []ask
	for i := range items {
		it := &items[i]
		if !it.limited || it.lim == nil {
			continue
		}
		for _, p := range it.prev {
			if now < p.until {
				return false
			}
		}
		if it.hits > 0 {
			asks = append(asks, ask{w: it.lim, key: it.key, n: it.hits})
		}
	}
	if len(asks) == 0 {
		return false
	}
	k, _ := j.allowAll(now, asks)
	a := 0
	for i := range items {
		if it := &items[i]; it.limited && it.lim != nil && it.hits > 0 {
			it.left, it.raw = asks[a].room, asks[a].room
			if k < 0 {
				it.counted = &allowedDecision
			}
			a++
		}
	}
	return true
}

// countedAll reports whether every descriptor that fits and has hits in a
// window was counted.
func countedAll(items []item) bool {
	for i := range items {
		if it := &items[i]; it.limited && it.fits && it.lim != nil && it.hits > 0 && it.counted == nil {
			return false
		}
	}
	return true
}

// countJointly counts, through a joint backend, every descriptor of a
// served request that fits, all or none, and sets each one's counted. A
// descriptor that no longer fits (another request took the room since the
// check) refuses the request, nothing counted: it reports false, and only
// that descriptor has counted, its refusal. One in shadow or quota mode, or
// any under the global shadow mode, refuses only itself: the others are
// asked again without it.
func (s *Service) countJointly(j joint, now int64, items []item) bool {
	var asks []ask
	var of []int // the item of each ask
	for i := range items {
		if it := &items[i]; it.limited && it.fits && it.lim != nil && it.hits > 0 {
			asks = append(asks, ask{w: it.lim, key: it.key, n: it.hits})
			of = append(of, i)
		}
	}
	for len(asks) > 0 {
		k, d := j.allowAll(now, asks)
		if k < 0 {
			for _, i := range of {
				items[i].counted = &allowedDecision
			}
			return true
		}
		it := &items[of[k]]
		it.counted = &d
		if !it.shadow && !it.quota && !s.shadow {
			for _, i := range of {
				if i != of[k] {
					items[i].counted = nil
				}
			}
			return false
		}
		asks, of = append(asks[:k], asks[k+1:]...), append(of[:k], of[k+1:]...)
	}
	return true
}

var allowedDecision = flow.Decision{Allowed: true}

// seriesOf returns the stats series of descriptor i: its value's, if its
// rule counts values apart and there is room; else its rule's, or its
// domain's for a limit of its own.
func (s *Service) seriesOf(st *state, req *rlsv3.RateLimitRequest, i int, it *item) *series {
	r := it.rule
	if r == nil {
		return s.stats.series(req.Domain, overrideRule, false)
	}
	if r.detailed || r.toMetric {
		k := st.cfg.domains[req.Domain].statsKey(req.Domain, req.Descriptors[i].Entries, r.detailed)
		if k = textcut.Cut(strings.TrimPrefix(k, req.Domain+"."), maxStatsKeyBytes); k != ruleKey(r) {
			if x := s.stats.series(req.Domain, k, true); x != nil {
				return x
			}
		}
	}
	return st.series[r]
}

// headersOf returns the RateLimit-* headers of the status with the least
// remaining, or of the last one over its limit outside quota mode; none
// if no status has a limit.
func headersOf(sts []*rlsv3.RateLimitResponse_DescriptorStatus, items []item) []*corev3.HeaderValue {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range sts {
		switch {
		case st.CurrentLimit == nil:
		case st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && !items[i].quota:
			pick, least = st, 0
		case st.LimitRemaining < least:
			pick, least = st, st.LimitRemaining
		}
	}
	if pick == nil {
		return nil
	}
	reset := pick.DurationUntilReset.AsDuration()
	secs := int64((reset + time.Second - 1) / time.Second)
	return []*corev3.HeaderValue{
		{Key: "RateLimit-Limit", Value: strconv.FormatUint(uint64(pick.CurrentLimit.RequestsPerUnit), 10)},
		{Key: "RateLimit-Remaining", Value: strconv.FormatUint(uint64(least), 10)},
		{Key: "RateLimit-Reset", Value: strconv.FormatInt(secs, 10)},
	}
}

func clampUint32(x int64) uint32 { return uint32(min(max(x, 0), math.MaxUint32)) }

// hitsOf is how many hits descriptor d asks: its own hits_addend if set
// (0 checks without counting), else the request's, at least 1.
func hitsOf(req *rlsv3.RateLimitRequest, d *commonv3.RateLimitDescriptor) int64 {
	h := uint64(max(req.HitsAddend, 1))
	if d.HitsAddend != nil {
		h = d.HitsAddend.Value
	}
	return int64(min(h, math.MaxInt64))
}

// descriptorKey is the key a descriptor is counted under: its domain, and
// each entry's key and value, or the shared pattern that stands for the
// value. Each part is preceded by its length, so that no two descriptors
// share a key.
func descriptorKey(domain string, entries []*commonv3.RateLimitDescriptor_Entry, share []string) string {
	return string(appendKey(nil, domain, entries, share))
}

// appendKey appends descriptorKey(domain, entries, share) to b.
func appendKey(b []byte, domain string, entries []*commonv3.RateLimitDescriptor_Entry, share []string) []byte {
	n := len(domain) + 4
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 8
	}
	b = slices.Grow(b, n)
	b = appendPart(b, domain)
	for i, e := range entries {
		v := e.Value
		if i < len(share) && share[i] != "" {
			v = share[i]
		}
		b = appendPart(appendPart(b, e.Key), v)
	}
	return b
}

// A scratch is the memory one decision works in: its items, and the bytes
// of their keys. Decisions take scratches from scratchPool and give them
// back, so that most allocate neither.
type scratch struct {
	items [8]item
	n     int // the items in use; more than len(items) are allocated apart
	keys  []byte
}

// maxScratchKeys is the most key bytes a scratch keeps for the next
// decision; a larger buffer, made for one request of long keys, is
// dropped.
const maxScratchKeys = 4 << 10

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// itemsOf returns n zero items.
func (sc *scratch) itemsOf(n int) []item {
	if n > len(sc.items) {
		return make([]item, n)
	}
	sc.n = n
	return sc.items[:n]
}

// key returns descriptorKey(domain, entries, share). If reuse, its bytes
// are the scratch's, valid until release: only for windows that keep no
// key past a call.
func (sc *scratch) key(reuse bool, domain string, entries []*commonv3.RateLimitDescriptor_Entry, share []string) string {
	if !reuse {
		return descriptorKey(domain, entries, share)
	}
	start := len(sc.keys)
	sc.keys = appendKey(sc.keys, domain, entries, share)
	b := sc.keys[start:]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// release clears the scratch, so that it holds on to nothing of the
// decision, and gives it back to scratchPool.
func (sc *scratch) release() {
	clear(sc.items[:sc.n])
	sc.n = 0
	sc.keys = sc.keys[:0]
	if cap(sc.keys) > maxScratchKeys {
		sc.keys = nil
	}
	scratchPool.Put(sc)
}

func appendPart(b []byte, s string) []byte {
	n := uint64(len(s))
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(append(b, byte(n)), s...)
}
