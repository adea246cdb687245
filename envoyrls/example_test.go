package envoyrls_test

import (
	"context"
	"fmt"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slidegate/slidegate/envoyrls"
)

// A service from envoyproxy/ratelimit's example configuration, asked in
// the process. A gRPC server serves it with Register.
func Example() {
	cfg, err := envoyrls.LoadDir("testdata/envoyproxy/examples")
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err := envoyrls.New(envoyrls.Settings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := svc.SetConfig(cfg); err != nil {
		fmt.Println(err)
		return
	}
	// source_cluster=proxy, destination_cluster=mock: 1 a minute.
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*commonv3.RateLimitDescriptor{{
		Entries: []*commonv3.RateLimitDescriptor_Entry{
			{Key: "source_cluster", Value: "proxy"},
			{Key: "destination_cluster", Value: "mock"},
		},
	}}}
	for range 2 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.CurrentLimit.RequestsPerUnit, "per", st.CurrentLimit.Unit, "remaining", st.LimitRemaining)
	}
	// Output:
	// OK 1 per MINUTE remaining 0
	// OVER_LIMIT 1 per MINUTE remaining 0
}
