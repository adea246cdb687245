module github.com/slidegate/slidegate/redisflow

go 1.25.0

replace github.com/slidegate/slidegate => ../

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/slidegate/slidegate v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
