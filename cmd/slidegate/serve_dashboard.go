package main

import (
	"cmp"
	"embed"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/slidegate/slidegate/envoyrls"
	"github.com/slidegate/slidegate/internal/textcut"
	"github.com/slidegate/slidegate/redisflow"
)

// The dashboard of slidegate serve, at /dashboard on the HTTP address: a
// page that polls /dashboard.json every second and shows, per domain and
// rule, the hits a second by outcome, with the key memory, the configs
// loaded and refused, and Redis's health. It holds no state and starts
// nothing: the rates are the browser's, from two polls in a row. It shows
// what /metrics shows on the same address, and costs nothing until a
// browser asks, so it is always served.
//
// What it sends is bounded whatever the config and the clients: the
// dashRules rules of the most hits (the others only counted), each name
// cut to dashNameBytes. JSON writes a byte as at most 6 (\u00XX), so a
// body holds at most about dashRules x (2 x 6 x dashNameBytes + 200)
// bytes besides the fixed fields: maxDashboardJSON.
const (
	dashRules        = 50
	dashNameBytes    = 256
	maxDashboardJSON = dashRules*(2*6*(dashNameBytes+len("…"))+200) + 1<<10
)

//go:embed serve_dashboard
var dashboardFiles embed.FS

// dashboardCSP lets the page run its own script and style, fetch its own
// JSON, and nothing else: no inline script, no other origin, no frame.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// A dashboardState is the body of /dashboard.json.
type dashboardState struct {
	At         int64           `json:"at"`        // Unix milliseconds
	Requests   [3]uint64       `json:"requests"`  // OK, OVER_LIMIT, invalid
	Config     [2]uint64       `json:"config"`    // loaded, refused
	KeyMemory  [2]int64        `json:"keyMemory"` // in use, limit
	Redis      *dashboardRedis `json:"redis"`     // nil without --redis
	Rules      []dashboardRule `json:"rules"`     // the dashRules of the most hits
	RulesTotal int             `json:"rulesTotal"`
}

type dashboardRedis struct {
	Healthy       bool   `json:"healthy"`
	Misconfigured bool   `json:"misconfigured"`
	Instances     int    `json:"instances"`
	RoundTrips    uint64 `json:"roundTrips"`
	Failures      uint64 `json:"failures"`
	Fallbacks     uint64 `json:"fallbacks"`
}

type dashboardRule struct {
	Domain string `json:"domain"`
	Rule   string `json:"rule"`
	// Hits, within, over the limit, near it, in shadow mode.
	Hits   uint64 `json:"hits"`
	Within uint64 `json:"within"`
	Over   uint64 `json:"over"`
	Near   uint64 `json:"near"`
	Shadow uint64 `json:"shadow"`
}

// readDashboard reads what the service (and its cluster, if not nil)
// counted so far.
func readDashboard(svc *envoyrls.Service, c *redisflow.Cluster, now time.Time) dashboardState {
	st := svc.Stats()
	d := dashboardState{
		At:         now.UnixMilli(),
		Requests:   [3]uint64{st.Requests, st.OverLimit, st.Invalid},
		Config:     [2]uint64{st.ConfigLoads, st.ConfigRefused},
		KeyMemory:  [2]int64{st.KeyMemory, st.KeyMemoryLimit},
		RulesTotal: len(st.Rules),
		Rules:      []dashboardRule{},
	}
	if c != nil {
		s := c.Stats()
		d.Redis = &dashboardRedis{Healthy: s.Healthy, Misconfigured: s.Err != nil, Instances: s.Instances,
			RoundTrips: s.RoundTrips, Failures: s.Failures, Fallbacks: s.Fallbacks}
	}
	rules := st.Rules
	slices.SortStableFunc(rules, func(a, b envoyrls.RuleStats) int { return cmp.Compare(b.Hits, a.Hits) })
	for _, r := range rules[:min(len(rules), dashRules)] {
		d.Rules = append(d.Rules, dashboardRule{
			Domain: textcut.Cut(r.Domain, dashNameBytes), Rule: textcut.Cut(r.Key, dashNameBytes),
			Hits: r.Hits, Within: r.WithinLimit, Over: r.OverLimit, Near: r.NearLimit, Shadow: r.ShadowMode,
		})
	}
	return d
}

// mountDashboard serves the dashboard of svc (and of c, if not nil) on mux.
func mountDashboard(mux *http.ServeMux, svc *envoyrls.Service, c *redisflow.Cluster) {
	file := func(name, contentType string) http.HandlerFunc {
		b, err := dashboardFiles.ReadFile("serve_dashboard/" + name)
		if err != nil {
			panic(err) // embedded: present by construction
		}
		return func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", contentType)
			h.Set("Content-Security-Policy", dashboardCSP)
			h.Set("X-Content-Type-Options", "nosniff")
			w.Write(b)
		}
	}
	mux.HandleFunc("GET /dashboard", file("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /dashboard.js", file("dashboard.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /dashboard.css", file("dashboard.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /dashboard.json", func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(readDashboard(svc, c, time.Now()))
		if err != nil {
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
}
