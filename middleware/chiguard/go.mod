module github.com/slidegate/slidegate/middleware/chiguard

go 1.26.0

replace github.com/slidegate/slidegate => ../../

require github.com/slidegate/slidegate v0.0.0-00010101000000-000000000000

require github.com/go-chi/chi/v5 v5.5.0
