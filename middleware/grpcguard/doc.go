// Package grpcguard guards gRPC calls with a [slidegate.Guard]. It has
// interceptors for servers, for the RPCs a service serves, and for
// clients, for the RPCs it makes.
//
// Each RPC enters the guard's resource named by its full method, such as
// "/pkg.Service/Method", or by what [WithResource] says. It exits when it
// ends, with the RPC's status. A code in the error set ([DefaultErrorCodes],
// or [WithErrorCodes]) counts as an error in the resource's statistics and
// against its breakers. Any other code counts as a success.
//
// An RPC that a rule blocks ends with one of two codes:
//
//   - codes.ResourceExhausted, for a flow rule's limit.
//   - codes.Unavailable, for a breaker, a shed or an adaptive rule.
//
// Where the rule knows when to retry, a google.rpc.RetryInfo detail says
// so (see [BlockStatus]). On a client, a blocked call never reaches the
// network. An RPC that ends with an error of code ResourceExhausted,
// Unavailable or DeadlineExceeded is recorded as overloaded
// ([slidegate.IsOverloaded]). So an adaptive rule on the client or on the
// server backs off. The caller gets the error unchanged.
//
// Server interceptors enter with [slidegate.WithInbound], so the guard
// also counts the service's traffic as a whole
// ([slidegate.Guard.Stats] of [slidegate.InboundResource]). Client interceptors enter as outbound
// traffic.
//
//	g, err := slidegate.New()
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "/shop.Orders/Create", Limit: 100}, // 100 per second
//	}})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(g)),
//		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(g)),
//	)
//
//	conn, err := grpc.NewClient(addr,
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(g)),
//		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(g)),
//	)
//
// The error a blocked RPC returns is a gRPC status error ([status.Code],
// [status.Convert]). It also wraps the [*slidegate.BlockError], so that the
// client that made the call can take it apart with [errors.As]. Only the
// status crosses the network.
//
// # Retries
//
// [WithRetry] makes [UnaryClientInterceptor] retry the calls that fail with
// codes.Unavailable, or with the codes it lists. Its
// [httpguard.RetryPolicy] says how often, and how long to wait. Retries
// stay within a [flow.RetryBudget]: they add at most a ratio of the recent
// calls plus a floor, however the service fails. No retry is sent into an
// open breaker. A half-open breaker's probe is never retried. Streams are
// not retried. grpc-go's own retries (a service config's retryPolicy)
// should then stay off. They would multiply with these, outside the
// budget.
//
//	budget, _ := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
//	in := grpcguard.UnaryClientInterceptor(g, grpcguard.WithRetry(budget, httpguard.RetryPolicy{}))
//
// # Keys
//
// An RPC's key ([slidegate.WithKey]) is what a resource's per-key rules
// ([slidegate.FlowRule.PerKey]) limit on its own: a client address, a
// tenant, an API key. These options set it:
//
//   - [KeyFromPeer] keys an RPC by its client's IP address, on a server.
//   - [KeyFromMetadata] keys it by an incoming metadata value, on a server.
//   - [KeyFrom] keys it by any function of its context and method.
//
// KeyFromPeer keys an IPv6 client by its /64. It believes the
// "x-forwarded-for" metadata only from the proxies it is told to trust,
// such as grpc-gateway or Envoy (see [PeerAddr]). Without a key option,
// every RPC has the empty key "", one key like any other.
//
//	// At most 100 RPCs per second from each tenant.
//	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
//		{Resource: "/shop.Orders/Create", Limit: 100, PerKey: true},
//	}})
//	in := grpcguard.UnaryServerInterceptor(g, grpcguard.KeyFromMetadata("x-tenant"))
//
// A key is input a client chooses. The guard gets at most
// 256 bytes of it. The status of a blocked RPC never
// repeats it.
//
// A server handler that panics is recorded as an error, and the panic goes
// on, unrecovered. grpcguard does not turn panics into statuses; that is a
// recovery interceptor's job.
package grpcguard
