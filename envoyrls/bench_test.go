package envoyrls

import (
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func BenchmarkBaselineTimeNow(b *testing.B) {
	for b.Loop() {
		_ = time.Now()
	}
}

// One descriptor of a rule per value, decided in the process: the
// service's own cost, without gRPC.
func BenchmarkDecideOneDescriptor(b *testing.B) {
	svc, err := New(Settings{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	c, err := parseFiles(map[string]string{"d.yaml": hitsConfig})
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.SetConfig(c); err != nil {
		b.Fatal(err)
	}
	reqs := make([]*rlsv3.RateLimitRequest, 1024)
	for i := range reqs {
		reqs[i] = request("d", desc("a", fmt.Sprint("user-", i)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := svc.ShouldRateLimit(b.Context(), reqs[i&1023]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// The same through Envoy's gRPC client on a loopback port.
func BenchmarkShouldRateLimitOverGRPC(b *testing.B) {
	r := newRig(b, map[string]string{"d.yaml": hitsConfig}, Settings{})
	req := request("d", desc("a", "user"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.call(req); err != nil {
			b.Fatal(err)
		}
	}
}
