package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/slidegate/slidegate/envoyrls"
	"github.com/slidegate/slidegate/internal/redistest"
)

// dashboardOf returns what /dashboard.json of s says now.
func dashboardOf(t *testing.T, s *served) dashboardState {
	t.Helper()
	var d dashboardState
	if err := json.Unmarshal([]byte(s.get(t, "/dashboard.json")), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// /dashboard serves the page, its script and style under a policy that
// runs no other; /dashboard.json tells each rule's hits by outcome, the
// requests, the configs loaded and refused, the key memory, and Redis.
func TestServeDashboardTellsEachRulesHitsAndRedis(t *testing.T) {
	srv := redistest.Start(t)
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	s := startServe(t, map[string]string{"edge.yaml": cfg}, "--redis", srv.Addr)
	for range 7 {
		s.ask(t, "edge", "remote_address", "10.0.0.1")
	}
	d := dashboardOf(t, s)
	if len(d.Rules) != 2 || d.RulesTotal != 2 {
		t.Fatalf("rules %+v of %d, want remote_address and the limits of requests", d.Rules, d.RulesTotal)
	}
	want := dashboardRule{Domain: "edge", Rule: "remote_address", Hits: 7, Within: 5, Over: 2, Near: 1}
	if d.Rules[0] != want {
		t.Errorf("first rule %+v, want %+v", d.Rules[0], want)
	}
	if d.Requests != [3]uint64{5, 2, 0} || d.Config != [2]uint64{1, 0} || d.KeyMemory[1] != 64<<20 {
		t.Errorf("requests %v, config %v, key memory %v", d.Requests, d.Config, d.KeyMemory)
	}
	if r := d.Redis; r == nil || !r.Healthy || r.Misconfigured || r.RoundTrips == 0 {
		t.Errorf("redis %+v", r)
	}
	if d.At <= 0 {
		t.Errorf("at %d", d.At)
	}

	for path, want := range map[string]string{
		"/dashboard":     `<script src="dashboard.js"`,
		"/dashboard.js":  "dashboard.json",
		"/dashboard.css": "table",
	} {
		resp, err := http.Get("http://" + s.http + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) ||
			resp.Header.Get("Content-Security-Policy") != dashboardCSP || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v, body lacks %q", path, resp.StatusCode, resp.Header, want)
		}
	}
	if strings.Contains(s.get(t, "/dashboard.js"), "innerHTML") {
		t.Errorf("the script writes markup")
	}
}

// Without --redis, the dashboard says nothing of Redis.
func TestServeDashboardWithoutRedisHasNoRedis(t *testing.T) {
	s := startServe(t, map[string]string{"edge.yaml": edgeConfig})
	if d := dashboardOf(t, s); d.Redis != nil || d.RulesTotal != 2 {
		t.Errorf("redis %+v, %d rules", d.Redis, d.RulesTotal)
	}
}

// A hostile config (thousands of rules, keys of kilobytes of characters
// that JSON escapes) and hostile values cannot grow /dashboard.json past
// maxDashboardJSON: it shows the dashRules rules of the most hits, their
// names cut, and counts the others.
func TestServeDashboardIsBoundedWhateverTheConfigAndTheValues(t *testing.T) {
	const rules = 2000
	// Names of 2 KiB of characters that JSON escapes, written in YAML's
	// double quotes.
	raw, quoted := strings.Repeat("<\x01\"&\u00ff", 150), strings.Repeat(`<\x01\"&\xff`, 150)
	var b, long strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	long.WriteString("domain: \"" + quoted + "\"\ndescriptors:\n")
	for i := range rules {
		rule := fmt.Sprintf("  - key: \"%d%s\"\n    detailed_metric: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n", i, quoted)
		b.WriteString(rule)
		if i < 10 {
			long.WriteString(rule)
		}
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "d.yaml"), b.String())
	writeFile(t, filepath.Join(dir, "long.yaml"), long.String())
	cfg, err := envoyrls.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := envoyrls.New(envoyrls.Settings{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	const domain = "d"
	ask := func(key, value string, n int) {
		for range n {
			_, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
				Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// 40 rules once, with a long value of their own, and rule 7 five
	// times more: the 50 shown are those 40 and 10 of no hits.
	value := strings.Repeat("<script>\u2028", 200)
	for i := range 40 {
		ask(fmt.Sprint(i)+raw, value, 1)
	}
	ask("7"+raw, "v", 5)

	out, err := json.Marshal(readDashboard(svc, nil, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > maxDashboardJSON {
		t.Errorf("%d bytes of JSON, more than %d", len(out), maxDashboardJSON)
	}
	if strings.Contains(string(out), "<script>") {
		t.Errorf("the JSON holds markup as it came")
	}
	var d dashboardState
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Rules) != dashRules || d.RulesTotal <= rules {
		t.Fatalf("%d rules shown of %d, want %d of more than %d", len(d.Rules), d.RulesTotal, dashRules, rules)
	}
	for i, r := range d.Rules {
		if len(r.Domain) > dashNameBytes+len("…") || len(r.Rule) > dashNameBytes+len("…") || !utf8.ValidString(r.Rule) {
			t.Errorf("rule %d: names of %d and %d bytes", i, len(r.Domain), len(r.Rule))
		}
		if i > 0 && r.Hits > d.Rules[i-1].Hits {
			t.Errorf("rule %d has more hits (%d) than the one before (%d)", i, r.Hits, d.Rules[i-1].Hits)
		}
	}
	// Rule 7's values, their keys cut within the rule's long name, count
	// in one series: 6 hits.
	if d.Rules[0].Hits != 6 || !strings.HasPrefix(d.Rules[0].Rule, "7") {
		t.Errorf("first rule %.20q with %d hits, want rule 7's with 6", d.Rules[0].Rule, d.Rules[0].Hits)
	}
	if last := d.Rules[dashRules-1]; last.Hits != 0 || !strings.HasPrefix(last.Domain, "<\x01") || !strings.HasSuffix(last.Domain, "…") {
		t.Errorf("last rule %.20q of %.20q with %d hits, want a rule of the long domain, its name cut, without hits", last.Rule, last.Domain, last.Hits)
	}
}
