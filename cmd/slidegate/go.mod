module github.com/slidegate/slidegate/cmd/slidegate

go 1.25.0

replace github.com/slidegate/slidegate => ../../

replace github.com/slidegate/slidegate/metrics => ../../metrics

replace github.com/slidegate/slidegate/redisflow => ../../redisflow

require (
	github.com/prometheus/client_golang v1.24.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/slidegate/slidegate v0.0.0-00010101000000-000000000000
	github.com/slidegate/slidegate/metrics v0.0.0-00010101000000-000000000000
	github.com/slidegate/slidegate/redisflow v0.0.0-00010101000000-000000000000
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
