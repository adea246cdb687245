module github.com/slidegate/slidegate

go 1.25.0

require (
	github.com/fsnotify/fsnotify v1.10.1
	go.yaml.in/yaml/v3 v3.0.6
)

require golang.org/x/sys v0.47.0 // indirect
