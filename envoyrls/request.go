package envoyrls

import (
	"sync"
	"time"
	"unicode/utf8"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Bounds of a request: what a client sends cannot grow the service's
// memory or time past them.
const (
	maxDomainBytes  = 256
	maxDescriptors  = 64
	maxEntries      = 32
	maxEntryBytes   = 4096    // a key and its value
	maxRequestBytes = 1 << 16 // the domain and every entry's key and value
	// maxOverrideShapes is how many distinct limits that requests set
	// themselves (a descriptor's limit) are counted at once.
	maxOverrideShapes = 64
	// maxInterval is the longest window a request may set itself.
	maxInterval = 20 * 365 * 24 * time.Hour
)

// MaxMessageBytes is the largest request message the service reads, for
// gRPC's MaxRecvMsgSize and the JSON endpoint's body.
const MaxMessageBytes = 1 << 20

// checkRequest returns an InvalidArgument status for a request that breaks
// a bound, naming the field.
func checkRequest(req *rlsv3.RateLimitRequest) error {
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	switch {
	case req.Domain == "":
		return bad("domain: empty")
	case len(req.Domain) > maxDomainBytes:
		return bad("domain: %d bytes, more than %d", len(req.Domain), maxDomainBytes)
	case !utf8.ValidString(req.Domain):
		return bad("domain: not valid UTF-8")
	case len(req.Descriptors) == 0:
		return bad("descriptors: none")
	case len(req.Descriptors) > maxDescriptors:
		return bad("descriptors: %d, more than %d", len(req.Descriptors), maxDescriptors)
	}
	total := len(req.Domain)
	for i, d := range req.Descriptors {
		switch {
		case d == nil || len(d.Entries) == 0:
			return bad("descriptors[%d].entries: none", i)
		case len(d.Entries) > maxEntries:
			return bad("descriptors[%d].entries: %d, more than %d", i, len(d.Entries), maxEntries)
		}
		for j, e := range d.Entries {
			switch {
			case e == nil || e.Key == "":
				return bad("descriptors[%d].entries[%d].key: empty", i, j)
			case len(e.Key)+len(e.Value) > maxEntryBytes:
				return bad("descriptors[%d].entries[%d]: key and value of %d bytes, more than %d", i, j, len(e.Key)+len(e.Value), maxEntryBytes)
			case !utf8.ValidString(e.Key) || !utf8.ValidString(e.Value):
				return bad("descriptors[%d].entries[%d]: not valid UTF-8", i, j)
			}
			total += len(e.Key) + len(e.Value)
		}
		if total > maxRequestBytes {
			return bad("descriptors[%d]: the request's keys and values pass %d bytes", i, maxRequestBytes)
		}
	}
	return nil
}

// overrides are the limiters of the limits that requests set themselves,
// one per unit and limit, at most maxOverrideShapes. One that no request
// used for a whole unit counts nothing any more, and gives its place up.
type overrides struct {
	mu sync.Mutex
	m  map[overrideShape]*overrideLimiter
}

type overrideShape struct {
	unit  rlsv3.RateLimitResponse_RateLimit_Unit
	mult  uint32
	limit uint32
}

type overrideLimiter struct {
	q      window
	last   int64 // when a request last used it, under overrides.mu
	length time.Duration
	answer *rlsv3.RateLimitResponse_RateLimit
}

// take fills it with the limiter of the limit lim that descriptor i sets
// itself.
func (o *overrides) take(s *Service, now int64, i int, lim *commonv3.RateLimitDescriptor_RateLimitOverride, it *item) error {
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(lim.Unit) // the same numbers, WEEK aside
	length := unitLength(unit)
	if length == 0 {
		return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit: %v is not a unit", i, lim.Unit)
	}
	mult := uint32(1)
	if lim.UnitMultiplier != nil && lim.UnitMultiplier.Value > 1 {
		mult = lim.UnitMultiplier.Value
		if int64(mult) > int64(maxInterval/length) {
			return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit_multiplier: %d %v is longer than %v", i, mult, unit, maxInterval)
		}
	}
	length *= time.Duration(mult)
	it.limited, it.unit = true, length
	sh := overrideShape{unit, mult, lim.RequestsPerUnit}
	o.mu.Lock()
	defer o.mu.Unlock()
	ol := o.m[sh]
	if ol == nil {
		if len(o.m) >= maxOverrideShapes && !o.evict(now) {
			return status.Errorf(codes.ResourceExhausted, "descriptors[%d].limit: more than %d distinct limits set by requests are in use", i, maxOverrideShapes)
		}
		ol = &overrideLimiter{length: length, answer: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: lim.RequestsPerUnit, Unit: unit}}
		if mult > 1 {
			ol.answer.UnitMultiplier = wrapperspb.UInt32(mult)
		}
		if lim.RequestsPerUnit > 0 {
			q, err := s.windows.window(int64(lim.RequestsPerUnit), length)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
			}
			ol.q = q
		}
		o.m[sh] = ol
	}
	ol.last = max(ol.last, now)
	it.lim, it.answer = ol.q, ol.answer
	return nil
}

// evict drops one limiter that no request used for a whole unit, and
// reports whether it found one.
func (o *overrides) evict(now int64) bool {
	for sh, ol := range o.m {
		if now-ol.last > int64(ol.length) {
			delete(o.m, sh)
			return true
		}
	}
	return false
}
