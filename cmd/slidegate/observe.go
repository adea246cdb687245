package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/dashboard"
	"github.com/slidegate/slidegate/metrics"
)

// observe mounts the metrics of g at /metrics and the dashboard at
// /slidegate/ on mux, and returns what stops them.
func observe(mux *http.ServeMux, g *slidegate.Guard) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(g), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	d, err := dashboard.New(g)
	if err != nil {
		return nil, err
	}
	mux.Handle("/slidegate/", http.StripPrefix("/slidegate", d))
	return func() { _ = d.Close() }, nil
}
