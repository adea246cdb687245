package envoyrls

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// FuzzShouldRateLimit: any request that protobuf decodes gets either an
// error or an answer with a status per descriptor, never a panic; an
// answer OK holds no status over the limit.
func FuzzShouldRateLimit(f *testing.F) {
	svc, err := New(Settings{Logger: quietLogger(), KeyMemory: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := parseFiles(map[string]string{"d.yaml": hitsConfig, "s.yaml": strings.Replace(statsConfig, "domain: d", "domain: s", 1)})
	if err != nil {
		f.Fatal(err)
	}
	if err := svc.SetConfig(cfg); err != nil {
		f.Fatal(err)
	}
	for _, req := range []*rlsv3.RateLimitRequest{
		request("d", desc("a", "1"), desc("b", "1")),
		request("d", desc("files", "shared/x"), desc("q1", "1"), desc("q2", "2")),
		request("s", desc("route", "/a", "method", "GET"), desc("user", "u")),
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, at int64) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		resp, err := svc.shouldRateLimitAt(int64(1)<<40+at%(int64(1)<<40), &req)
		if err != nil {
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
		for _, st := range resp.Statuses {
			if resp.OverallCode == ok && st.Code == over && !svc.shadow {
				for i := range req.Descriptors {
					if m := cfg.domains[req.Domain]; m != nil {
						if r := m.find(req.Descriptors[i].Entries).rule; r != nil && r.quota {
							return // quota mode answers OK with a quota over
						}
					}
				}
				t.Fatalf("OK with a status over the limit: %v", resp)
			}
		}
	})
}
