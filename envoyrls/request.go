package envoyrls

import (
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
	// maxLooseShapes is how many windows of limits that no rule in force
	// has (a descriptor's own limit) are kept at once.
	maxLooseShapes = 64
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

// shapeOf returns the shape of the limit that descriptor i sets itself,
// and what its answer's current_limit says.
func shapeOf(i int, lim *commonv3.RateLimitDescriptor_RateLimitOverride) (shape, *rlsv3.RateLimitResponse_RateLimit, error) {
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(lim.Unit) // the same numbers, WEEK aside
	length := unitLength(unit)
	if length == 0 {
		return shape{}, nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit: %v is not a unit", i, lim.Unit)
	}
	answer := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: lim.RequestsPerUnit, Unit: unit}
	if m := lim.UnitMultiplier; m != nil && m.Value > 1 {
		if int64(m.Value) > int64(maxInterval/length) {
			return shape{}, nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit.unit_multiplier: %d %v is longer than %v", i, m.Value, unit, maxInterval)
		}
		length *= time.Duration(m.Value)
		answer.UnitMultiplier = wrapperspb.UInt32(m.Value)
	}
	return shape{limit: lim.RequestsPerUnit, interval: length}, answer, nil
}
