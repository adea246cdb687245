//go:build doccheck

// The packages outside the standard library that importPaths names, so
// that go mod tidy keeps the modules that the blocks compile against
// required. The build tag keeps them out of this package's build; the test
// checks that the list and importPaths agree.

package doccheck

import (
	_ "github.com/gin-gonic/gin"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/labstack/echo/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/slidegate/slidegate"
	_ "github.com/slidegate/slidegate/breaker"
	_ "github.com/slidegate/slidegate/clock"
	_ "github.com/slidegate/slidegate/cpu"
	_ "github.com/slidegate/slidegate/dashboard"
	_ "github.com/slidegate/slidegate/etcdrules"
	_ "github.com/slidegate/slidegate/flow"
	_ "github.com/slidegate/slidegate/metrics"
	_ "github.com/slidegate/slidegate/middleware/chiguard"
	_ "github.com/slidegate/slidegate/middleware/echoguard"
	_ "github.com/slidegate/slidegate/middleware/ginguard"
	_ "github.com/slidegate/slidegate/middleware/grpcguard"
	_ "github.com/slidegate/slidegate/middleware/httpguard"
	_ "github.com/slidegate/slidegate/otelguard"
	_ "github.com/slidegate/slidegate/redisflow"
	_ "github.com/slidegate/slidegate/rulefile"
	_ "github.com/slidegate/slidegate/window"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.opentelemetry.io/otel/metric"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "google.golang.org/grpc"
)
