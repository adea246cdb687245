module github.com/slidegate/slidegate/middleware/echoguard

go 1.26.0

replace github.com/slidegate/slidegate => ../../

require (
	github.com/labstack/echo/v4 v4.16.0
	github.com/slidegate/slidegate v0.0.0-00010101000000-000000000000
)

require (
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
