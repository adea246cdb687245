package envoyrls

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/internal/redistest"
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

// A million distinct values of one rule within one unit, decided in the
// process: the heap the service holds after them, against its key memory
// (64 MiB), reported as heap-bytes.
func BenchmarkHeapOfAMillionDistinctValues(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		c := clock.NewManual(int64(time.Hour))
		svc, err := New(Settings{Logger: quietLogger(), Clock: c})
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := parseFiles(map[string]string{"d.yaml": hitsConfig})
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.SetConfig(cfg); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := range 1_000_000 {
			c.Advance(time.Microsecond) // a million within a second
			svc.shouldRateLimitAt(c.Now(), request("d", desc("a", "user-"+strconv.Itoa(i))))
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
		b.ReportMetric(float64(svc.memInUse()), "key-memory-bytes")
		runtime.KeepAlive(svc)
		b.StartTimer()
	}
}

// Requests of one and of three descriptors decided over a redis-server that
// the benchmark starts, on distinct values: the round trip and the script,
// without gRPC.
func BenchmarkDecideOverRedis(b *testing.B) {
	srv := redistest.Start(b)
	r, _ := sharedRig(b, srv, 1, map[string]string{"d.yaml": sharedConfig})
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				v := "user-" + strconv.Itoa(i)
				req := request("d", desc("wide", v))
				if n == 3 {
					req = request("d", desc("wide", v), desc("narrow", v), desc("a", v))
				}
				if _, err := r.svc.ShouldRateLimit(b.Context(), req); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
