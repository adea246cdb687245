package envoyrls

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Requests that break a bound get InvalidArgument naming the field, and
// the service goes on answering.
func TestHostileRequestsGetAClearStatus(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	many := func(n int) []*commonv3.RateLimitDescriptor {
		ds := make([]*commonv3.RateLimitDescriptor, n)
		for i := range ds {
			ds[i] = desc("a", fmt.Sprint(i))
		}
		return ds
	}
	wide := &commonv3.RateLimitDescriptor{}
	for i := range 1000 {
		wide.Entries = append(wide.Entries, &commonv3.RateLimitDescriptor_Entry{Key: fmt.Sprint("k", i), Value: "v"})
	}
	badUnit := desc("a", "1")
	badUnit.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit(99)}
	longUnit := desc("a", "1")
	longUnit.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR}
	longUnit.Limit.UnitMultiplier = wrapperspb.UInt32(1000)
	for _, c := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"no domain", request("", desc("a", "1")), "domain: empty"},
		{"a long domain", request(strings.Repeat("d", 300), desc("a", "1")), "domain: 300 bytes"},
		{"no descriptors", request("d"), "descriptors: none"},
		{"a descriptor without entries", request("d", desc("a", "1"), &commonv3.RateLimitDescriptor{}), "descriptors[1].entries: none"},
		{"an entry without a key", request("d", desc("", "1")), "descriptors[0].entries[0].key: empty"},
		{"thousands of descriptors", request("d", many(5000)...), "descriptors: 5000, more than 64"},
		{"thousands of entries", request("d", wide), "descriptors[0].entries: 1000, more than 32"},
		{"a huge value", request("d", desc("a", strings.Repeat("v", 5000))), "descriptors[0].entries[0]: key and value of 5001 bytes"},
		{"many long values", request("d", many64Long()...), "the request's keys and values pass 65536 bytes"},
		{"an unknown unit", request("d", badUnit), "descriptors[0].limit.unit"},
		{"a window of a thousand years", request("d", longUnit), "descriptors[0].limit.unit_multiplier"},
	} {
		_, err := r.call(c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%s: got %v, want InvalidArgument with %q", c.name, err, c.want)
		}
	}
	if c := r.ask(t, request("d", desc("a", "1"))).OverallCode; c != ok {
		t.Fatalf("after the hostile requests: %v", c)
	}
}

func many64Long() []*commonv3.RateLimitDescriptor {
	ds := make([]*commonv3.RateLimitDescriptor, 40)
	for i := range ds {
		ds[i] = desc("a", strings.Repeat("v", 2000))
	}
	return ds
}

// A message over the bound is refused by gRPC before it is read whole; a
// string of invalid UTF-8 is refused as it is decoded.
func TestOversizedAndInvalidUTF8MessagesAreRefused(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	big := request("d", desc("a", strings.Repeat("v", 2<<20)))
	if _, err := r.call(big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 2 MiB message: %v, want ResourceExhausted", err)
	}
	// RateLimitRequest{domain: "d", descriptors: [{entries: [{key: "a", value: "\xff"}]}]},
	// written by hand: the generated code refuses to encode it.
	entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "a")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendBytes(entry, []byte{0xff, 0xfe})
	d := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	msg := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "d")
	msg = protowire.AppendBytes(protowire.AppendTag(msg, 2, protowire.BytesType), d)
	var out []byte
	err := r.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
		msg, &out, grpc.ForceCodec(rawCodec{}))
	if err == nil || !strings.Contains(strings.ToLower(status.Convert(err).Message()), "utf-8") {
		t.Errorf("invalid UTF-8: %v, want a status that says UTF-8", err)
	}
	// The service itself refuses it too, for callers that do not decode.
	bad := request("d", desc("a", "\xff"))
	if _, err := r.svc.ShouldRateLimit(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid UTF-8 given directly: %v", err)
	}
}

// A flood of distinct descriptor values keeps the windows' memory within
// the configured bound, and no value gets more than its limit.
func TestAFloodOfDistinctValuesStaysWithinTheKeyMemory(t *testing.T) {
	const budget = 2 << 20
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{KeyMemory: budget})
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refusedSecond := 0
	for i := range n {
		req := request("d", desc("a", fmt.Sprint("attacker-", i)))
		req.HitsAddend = 6
		if _, err := r.svc.shouldRateLimitAt(r.clock.Now(), req); err != nil {
			t.Fatal(err)
		}
		// The same value again: 6 + 6 is over its 10 a second.
		if i%100 == 0 {
			resp, _ := r.svc.shouldRateLimitAt(r.clock.Now(), req)
			if resp.OverallCode == over {
				refusedSecond++
			}
		}
		r.clock.Advance(time.Second / time.Duration(n))
	}
	if refusedSecond != (n+99)/100 {
		t.Errorf("a value over its limit was allowed: %d of %d second asks refused", refusedSecond, (n+99)/100)
	}
	if got := r.svc.memInUse(); got > budget+512<<10 {
		t.Errorf("key memory in use %d bytes, over the budget %d and the floor", got, budget)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 3*budget {
		t.Errorf("the heap grew by %d bytes for %d distinct values, budget %d", grew, n, budget)
	}
	t.Logf("key memory %d bytes for %d values", r.svc.memInUse(), n)
}

// Requests that set their own limits are held to 64 distinct limits that
// no rule has at once; a limit unused for its whole unit gives its place
// up. A limit that a rule has shares the rule's window.
func TestLimitsSetByRequestsAreBounded(t *testing.T) {
	r := newRig(t, map[string]string{"d.yaml": hitsConfig}, Settings{})
	ask := func(limit uint32) error {
		d := desc("a", "x")
		d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: limit, Unit: typev3.RateLimitUnit_SECOND}
		_, err := r.call(request("d", d))
		return err
	}
	for i := range uint32(maxLooseShapes) {
		if err := ask(100 + i); err != nil {
			t.Fatal(err)
		}
	}
	if err := ask(7); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 65th limit: %v, want ResourceExhausted", err)
	}
	if err := ask(1); err != nil {
		t.Fatalf("the limit of a rule in force (b, 1 a second): %v", err)
	}
	r.clock.Advance(2 * time.Second)
	if err := ask(7); err != nil {
		t.Fatalf("a new limit once the others idled: %v", err)
	}
	if r.svc.shapes.loose > maxLooseShapes {
		t.Fatalf("%d windows for limits set by requests", r.svc.shapes.loose)
	}
}

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
