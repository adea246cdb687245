package envoyrls

import (
	"strconv"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/slidegate/slidegate/clock"
)

// A decision served in the process allocates its answer only: for one
// descriptor, the response, its status and the status's duration in one
// allocation; for more, the response and three slices (statuses, their
// pointers, their durations). A descriptor that sets its own limit adds
// the current_limit that answers it.
func TestALocalDecisionAllocatesOnlyItsAnswer(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted without the race detector, whose sync.Pool drops scratches")
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	cases := []struct {
		name string
		step time.Duration // between two decisions
		want float64
		req  func(i int) *rlsv3.RateLimitRequest
	}{
		{"one descriptor, allowed", time.Millisecond, 1, func(i int) *rlsv3.RateLimitRequest {
			return request("d", desc("a", keys[i%len(keys)])) // each key once a second, of 10
		}},
		{"one descriptor, refused", time.Microsecond, 1, func(int) *rlsv3.RateLimitRequest {
			return request("d", desc("a", "hot"))
		}},
		{"two descriptors", time.Millisecond, 4, func(i int) *rlsv3.RateLimitRequest {
			return request("d", desc("a", keys[i%len(keys)]), desc("b", keys[i%len(keys)]))
		}},
		{"unknown descriptor", time.Millisecond, 1, func(i int) *rlsv3.RateLimitRequest {
			return request("d", desc("none", keys[i%len(keys)]))
		}},
		{"a limit of its own", time.Millisecond, 2, func(i int) *rlsv3.RateLimitRequest {
			d := desc("a", keys[i%len(keys)])
			d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_MINUTE}
			return request("d", d)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clock.NewManual(int64(time.Hour))
			svc, err := New(Settings{Logger: quietLogger(), Clock: c})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := parseFiles(map[string]string{"d.yaml": hitsConfig})
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			reqs := make([]*rlsv3.RateLimitRequest, len(keys))
			for i := range reqs {
				reqs[i] = tc.req(i)
			}
			i := 0
			decide := func() {
				c.Advance(tc.step)
				if _, err := svc.shouldRateLimitAt(c.Now(), reqs[i%len(reqs)]); err != nil {
					t.Fatal(err)
				}
				i++
			}
			for range 5000 { // warm: the windows' tables at their size
				decide()
			}
			if a := testing.AllocsPerRun(2000, decide); a != tc.want {
				t.Fatalf("a decision allocates %v times, want %v", a, tc.want)
			}
		})
	}
}
