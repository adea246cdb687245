package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// serve logs, a structured line each, the config loaded at the start, a
// config refused (with its problems; the one in force stays) and one
// reloaded, and counts them on /metrics; and its shutdown, from the
// stopping to the stopped.
func TestServeLogsEachConfigLoadedRefusedAndReloaded(t *testing.T) {
	s := startServe(t, map[string]string{"edge.yaml": edgeConfig})
	writeFile(t, filepath.Join(s.dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	eventually(t, "the refusal logged", func() bool { return strings.Contains(s.stderr.String(), "config refused") })
	writeFile(t, filepath.Join(s.dir, "edge.yaml"), strings.Replace(edgeConfig, "100", "5", 1))
	eventually(t, "the reload logged", func() bool { return strings.Contains(s.stderr.String(), "config reloaded") })
	body := s.get(t, "/metrics")
	for series, want := range map[string]float64{
		`slidegate_ratelimit_config_loads_total{result="loaded"}`:  2,
		`slidegate_ratelimit_config_loads_total{result="refused"}`: 1,
	} {
		if v, _ := metric(body, series); v != want {
			t.Errorf("%s %v, want %v", series, v, want)
		}
	}
	if c := s.stop(); c != 0 {
		t.Fatalf("status %d", c)
	}
	log := s.stderr.String()
	for _, want := range []string{
		`level=INFO msg="rate limit config loaded" dir=` + s.dir + ` domains=1 files=1`,
		`level=INFO msg=serving grpc=` + s.grpc + ` http=` + s.http + ` config=` + s.dir,
		`level=WARN msg="rate limit config refused; the one in force stays" dir=` + s.dir + ` problems="edge.yaml:4: edge.remote_address: rate_limit.unit: \"fortnight\" is not a unit`,
		`level=INFO msg="rate limit config reloaded" dir=` + s.dir + ` domains=1 files=1`,
		`level=INFO msg="stopping: finishing the requests in flight" grace=10s`,
		`level=INFO msg=stopped`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
}
