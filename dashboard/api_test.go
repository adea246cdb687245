package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/internal/bounds"
)

func mustRules(t *testing.T, js string) slidegate.Rules {
	t.Helper()
	var r slidegate.Rules
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func putRules(d http.Handler, auth, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, "/api/rules", strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	d.ServeHTTP(w, req)
	return w
}

const startRules = `{"flow":[{"resource":"GET /a","limit":10}]}`

func TestRuleEditingIsDisabledByDefault(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(mustRules(t, startRules)); err != nil {
		t.Fatal(err)
	}
	w := putRules(f.d, "Bearer x", `{}`)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("PUT api/rules: %d, Allow %q; want 405, GET, HEAD", w.Code, w.Header().Get("Allow"))
	}
	if got := f.g.Rules(); len(got.Flow) != 1 {
		t.Errorf("rules changed to %+v", got)
	}
	if f.snapshot(t).Editing {
		t.Error("the snapshot says editing is enabled")
	}
}

func TestRuleEditing(t *testing.T) {
	const token = "s3cret-token"
	valid := `{"flow":[{"resource":"GET /a","limit":5,"interval":"500ms"}],"breakers":[{"resource":"db","strategy":"error_count","count":3}]}`
	tests := []struct {
		name       string
		auth, body string
		code       int
		header     [2]string // a header the response must have
		inBody     string    // a string the response body must hold
		applied    bool      // the rules in force are now the body's
	}{
		{"no token", "", valid, 401, [2]string{"WWW-Authenticate", `Bearer realm="slidegate"`}, "bearer token", false},
		{"another scheme", "Basic " + token, valid, 401, [2]string{}, "bearer token", false},
		{"empty token", "Bearer ", valid, 401, [2]string{}, "bearer token", false},
		{"wrong token", "Bearer s3cret-tokem", valid, 403, [2]string{}, "wrong token", false},
		{"token prefix", "Bearer s3cret", valid, 403, [2]string{}, "wrong token", false},
		{"not JSON", "Bearer " + token, `flow: []`, 400, [2]string{}, "reading the rules", false},
		{"unknown field", "Bearer " + token, `{"flows":[]}`, 400, [2]string{}, "unknown field", false},
		{"trailing data", "Bearer " + token, valid + ` {}`, 400, [2]string{}, "data after the rules", false},
		{"bare number duration", "Bearer " + token, `{"flow":[{"resource":"a","limit":1,"interval":1}]}`, 400, [2]string{}, "reading the rules", false},
		{"too large", "Bearer " + token, `{"flow":[` + strings.Repeat(`{"resource":"a","limit":1},`, maxRulesBytes/20) + `]}`, 413, [2]string{}, "1 MiB", false},
		{"invalid rules", "Bearer " + token, `{"flow":[{"resource":"GET /a","limit":-1}],"breakers":[{"resource":"db","strategy":"nope"}]}`, 422, [2]string{}, `"field":"limit"`, false},
		{"valid", "Bearer " + token, valid, 200, [2]string{"Content-Type", "application/json"}, `"interval":"500ms"`, true},
		{"valid, scheme in lower case", "bearer " + token, valid, 200, [2]string{}, `"count":3`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, WithRuleEditing(token))
			before := mustRules(t, startRules)
			if err := f.g.SetRules(before); err != nil {
				t.Fatal(err)
			}
			w := putRules(f.d, tt.auth, tt.body)
			if w.Code != tt.code {
				t.Fatalf("PUT api/rules: %d %s, want %d", w.Code, w.Body, tt.code)
			}
			if k := tt.header[0]; k != "" && w.Header().Get(k) != tt.header[1] {
				t.Errorf("%s: %q, want %q", k, w.Header().Get(k), tt.header[1])
			}
			if !strings.Contains(w.Body.String(), tt.inBody) {
				t.Errorf("body %s does not hold %s", w.Body, tt.inBody)
			}
			want := before
			if tt.applied {
				want = mustRules(t, tt.body)
			}
			if got := f.g.Rules(); !reflect.DeepEqual(got, want) {
				t.Errorf("rules in force %+v, want %+v", got, want)
			}
			if !f.snapshot(t).Editing {
				t.Error("the snapshot says editing is disabled")
			}
		})
	}
}

func TestInvalidRulesListEveryProblem(t *testing.T) {
	f := newFixture(t, nil, WithRuleEditing("t"))
	w := putRules(f.d, "Bearer t", `{"flow":[{"resource":"GET /a","limit":-1}],"breakers":[{"resource":"db","strategy":"nope"}]}`)
	if w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("PUT api/rules: %d %s, want 422", w.Code, w.Body)
	}
	var body struct {
		Error    string
		Problems []problemJSON
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Problems) != 2 {
		t.Fatalf("problems %+v, want 2", body.Problems)
	}
	p := body.Problems[0]
	if !strings.HasPrefix(p.Place, "flow[0]") || p.Field != "limit" || p.Reason == "" || !strings.Contains(p.Message, "limit") {
		t.Errorf("first problem %+v, want flow[0]'s limit", p)
	}
	if q := body.Problems[1]; !strings.HasPrefix(q.Place, "breakers[0]") || q.Field != "strategy" {
		t.Errorf("second problem %+v, want breakers[0]'s strategy", q)
	}
}

func TestGetRules(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(mustRules(t, `{"flow":[{"resource":"GET /a","limit":10,"interval":"2s"}]}`)); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/rules", nil))
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"flow":[{"resource":"GET /a","limit":10,"interval":"2s"}]}` {
		t.Errorf("GET api/rules: %d %s", w.Code, w.Body)
	}
}

// get fetches url and returns the response's status, header and body.
func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestWorksUnderAPrefix(t *testing.T) {
	f := newFixture(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/ops/slidegate/", http.StripPrefix("/ops/slidegate", f.d))
	mux.Handle("/ops/slidegate", http.StripPrefix("/ops/slidegate", f.d))
	srv := newServer(t, mux)

	code, h, page := get(t, srv.URL+"/ops/slidegate/")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("the page: %d %s", code, h.Get("Content-Type"))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("the page's Content-Security-Policy %q", csp)
	}
	// Every asset the page names is relative, and is there.
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 4 {
		t.Fatalf("the page names %d assets: %q", len(refs), refs)
	}
	wantType := map[string]string{".js": "text/javascript", ".css": "text/css"}
	for _, m := range refs {
		ref := m[1]
		if ref == "data:," {
			continue
		}
		if strings.HasPrefix(ref, "/") || strings.Contains(ref, ":") {
			t.Errorf("the page names %q: not relative", ref)
			continue
		}
		code, h, _ := get(t, srv.URL+"/ops/slidegate/"+ref)
		ext := ref[strings.LastIndex(ref, "."):]
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), wantType[ext]) {
			t.Errorf("%s: %d %s", ref, code, h.Get("Content-Type"))
		}
	}
	// So is every URL the script fetches.
	_, _, js := get(t, srv.URL+"/ops/slidegate/assets/app.js")
	for _, want := range []string{`new EventSource("api/events")`, `fetch("api/rules"`} {
		if !strings.Contains(js, want) {
			t.Errorf("app.js does not hold %s", want)
		}
	}
	if regexp.MustCompile(`["'\x60]/api`).MatchString(js) {
		t.Error("app.js names an absolute API URL")
	}
	if code, _, body := get(t, srv.URL+"/ops/slidegate/api/snapshot"); code != 200 || !strings.Contains(body, `"resources"`) {
		t.Errorf("api/snapshot under the prefix: %d %s", code, body)
	}

	// The mount point without its slash redirects to it, relatively.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(srv.URL + "/ops/slidegate?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || loc != "slidegate/" {
		t.Errorf("GET /ops/slidegate: %d to %q, want 301 to slidegate/", resp.StatusCode, loc)
	}
}

func TestAssets(t *testing.T) {
	f := newFixture(t, nil)
	srv := newServer(t, f.d)

	code, h, body := get(t, srv.URL+"/assets/vendor/uplot/uPlot.iife.min.js")
	if code != 200 || !strings.Contains(body, "uPlot") || h.Get("ETag") == "" {
		t.Fatalf("uPlot: %d, ETag %q", code, h.Get("ETag"))
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/assets/vendor/uplot/uPlot.iife.min.js", nil)
	req.Header.Set("If-None-Match", h.Get("ETag"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidating uPlot: %d, want 304", resp.StatusCode)
	}
	for _, p := range []string{"/assets/", "/assets/vendor", "/assets/vendor/", "/assets/nope.js", "/index.html", "/assets/../index.html", "/api/nope"} {
		if code, _, _ := get(t, srv.URL+p); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	if code, _, _ := get(t, srv.URL+"/assets/vendor/uplot/LICENSE"); code != 200 {
		t.Errorf("uPlot's licence: %d", code)
	}
	resp, err = http.Head(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || f.d.openStreams() != 0 {
		t.Errorf("HEAD api/events: %d %s, %d streams", resp.StatusCode, resp.Header.Get("Content-Type"), f.d.openStreams())
	}
	resp, err = http.Post(srv.URL+"/api/snapshot", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST api/snapshot: %d, want 405", resp.StatusCode)
	}
}

func TestZeroDashboardAnswers500(t *testing.T) {
	var d Dashboard
	for _, path := range []string{"/", "/api/snapshot", "/api/events"} {
		w := httptest.NewRecorder()
		d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "dashboard.New") {
			t.Errorf("GET %s of a zero Dashboard: %d %s; want 500 naming New", path, w.Code, w.Body)
		}
	}
	d.Sample()
	if err := d.Close(); err != nil {
		t.Errorf("Close of a zero Dashboard: %v", err)
	}
}

// history fetches api/history for name.
func (f *fixture) history(t *testing.T, name string) (int, resourceHistoryJSON) {
	t.Helper()
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/history?resource="+url.QueryEscape(name), nil))
	var h resourceHistoryJSON
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &h); err != nil {
			t.Fatalf("decoding api/history: %v\n%s", err, w.Body)
		}
	}
	return w.Code, h
}

func TestSnapshotCarriesAtMostWithSnapshotPointsOfHistory(t *testing.T) {
	const resources, points, samples = 10, 25, 6
	f := newFixture(t, nil, WithSnapshotPoints(points))
	f.fill(t, resources, samples)
	s := f.snapshot(t)
	if len(s.Resources) != resources {
		t.Fatalf("%d resources, want %d", len(s.Resources), resources)
	}
	total := 0
	for _, r := range s.Resources {
		h := r.History
		total += len(h.T)
		if len(h.T) != points/resources || !r.Partial || h.T[len(h.T)-1] != s.Time {
			t.Errorf("%s: %d points up to %v, partial %v; want the newest %d, partial", r.Name, len(h.T), h.T, r.Partial, points/resources)
		}
		// api/history has them all, and the same newest ones.
		code, whole := f.history(t, r.Name)
		if code != http.StatusOK || whole.Seq != s.Seq || whole.Name != r.Name || whole.Partial || len(whole.History.T) != samples {
			t.Fatalf("api/history of %s: %d, seq %d, %d points, partial %v; want 200, seq %d, %d points", r.Name, code, whole.Seq, len(whole.History.T), whole.Partial, s.Seq, samples)
		}
		if got, want := whole.History.AllowedRate[samples-len(h.T):], h.AllowedRate; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: newest allowed/s %v in api/history, %v in the snapshot", r.Name, got, want)
		}
	}
	if total > points {
		t.Errorf("%d points in the snapshot, over %d", total, points)
	}
	if h := s.Inbound.History; len(h.T) != samples || s.Inbound.Partial {
		t.Errorf("inbound: %d points, partial %v; want all %d", len(h.T), s.Inbound.Partial, samples)
	}

	for _, name := range []string{"nope", "", strings.Repeat("x", bounds.MaxNameLength+1)} {
		if code, _ := f.history(t, name); code != http.StatusNotFound {
			t.Errorf("api/history of %.20q: %d, want 404", name, code)
		}
	}
}

func TestSnapshotPointsBoundTheHistoryOfEachResourceToOneAtLeast(t *testing.T) {
	for _, tt := range []struct {
		points, want int
		partial      bool
	}{
		{0, 1, true},
		{3, 1, true},
		{30, 3, true},
		{40, 4, false}, // the whole history
		{defaultSnapshotPoints, 4, false},
	} {
		f := newFixture(t, nil, WithSnapshotPoints(tt.points))
		f.fill(t, 10, 4)
		for _, r := range f.snapshot(t).Resources {
			if len(r.History.T) != tt.want || r.Partial != tt.partial {
				t.Fatalf("WithSnapshotPoints(%d): %s has %d points, partial %v; want %d, %v", tt.points, r.Name, len(r.History.T), r.Partial, tt.want, tt.partial)
			}
		}
	}
}

// keys returns the keys of the JSON object v, sorted.
func keys(t *testing.T, what string, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", what, v)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// objectAt returns the value at path in the JSON value v: object keys, and
// for arrays the index of the element.
func objectAt(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok || m[p] == nil {
				t.Fatalf("no %q in %v", p, v)
			}
			v = m[p]
		case int:
			a, ok := v.([]any)
			if !ok || p >= len(a) {
				t.Fatalf("no element %d in %v", p, v)
			}
			v = a[p]
		}
	}
	return v
}

// rawJSON fetches path from d and decodes its body.
func rawJSON(t *testing.T, d http.Handler, path string) any {
	t.Helper()
	w := httptest.NewRecorder()
	d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	var v any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return v
}

// TestJSONSpeaksTheVocabulary pins the API's field names: requests are
// allowed or blocked, and the allowed ones succeed or fail.
func TestJSONSpeaksTheVocabulary(t *testing.T) {
	one := int64(1)
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{
		Breakers: []slidegate.BreakerRule{{Resource: "db", Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: &one, OpenTimeout: slidegate.Duration(time.Minute)}},
	}); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, f.d)
	s := openStream(t, srv.URL+"/api/events")
	var first snapshotJSON
	s.next(t, "snapshot", &first)
	// 1 succeeds, 2 fail and open the breaker, which blocks the next 3.
	f.requests(t, "db", 1, time.Millisecond, false)
	f.requests(t, "db", 2, time.Millisecond, true)
	f.requests(t, "db", 3, time.Millisecond, false)
	f.step(time.Second)

	var (
		stats   = []string{"allowed", "avg_rt", "blocked", "failed", "in_flight", "max_rt", "p50", "p90", "p99", "succeeded", "totals"}
		totals  = []string{"allowed", "blocked", "failed", "rt", "succeeded", "would_block"}
		columns = []string{"allowed_rate", "blocked_rate", "breaker", "failed_rate", "in_flight", "p50", "p99", "t", "would_block_rate"}
		brk     = []string{"block_ratio", "blocked", "failed", "probes_in_flight", "requests", "resource", "retry_after", "rule", "slow", "state", "strategy", "succeeded"}
	)
	check := func(what string, v any, want []string) {
		t.Helper()
		if got := keys(t, what, v); !slices.Equal(got, want) {
			t.Errorf("%s has the fields %q, want %q", what, got, want)
		}
	}
	// The counts behind the names: 3 allowed (1 succeeded, 2 failed), 3
	// blocked.
	counts := func(what string, v any) {
		t.Helper()
		m := v.(map[string]any)
		if m["allowed"] != 3.0 || m["blocked"] != 3.0 || m["succeeded"] != 1.0 || m["failed"] != 2.0 {
			t.Errorf("%s: %v, want 3 allowed, 3 blocked, 1 succeeded, 2 failed", what, v)
		}
	}
	rates := func(what string, v any, allowed, blocked, failed any) {
		t.Helper()
		m := v.(map[string]any)
		if m["allowed_rate"] != allowed || m["blocked_rate"] != blocked || m["failed_rate"] != failed {
			t.Errorf("%s: %v, want %v allowed/s, %v blocked/s, %v failed/s", what, v, allowed, blocked, failed)
		}
	}

	snap := rawJSON(t, f.d, "/api/snapshot")
	db := objectAt(t, snap, "resources", 0)
	check("a snapshot's resource stats", objectAt(t, db, "stats"), stats)
	counts("a snapshot's resource stats", objectAt(t, db, "stats"))
	check("a snapshot's resource totals", objectAt(t, db, "stats", "totals"), totals)
	counts("a snapshot's resource totals", objectAt(t, db, "stats", "totals"))
	check("a snapshot's resource history", objectAt(t, db, "history"), columns)
	check("a snapshot's inbound history", objectAt(t, snap, "inbound", "history"), columns)
	br := objectAt(t, snap, "breakers", 0)
	check("a snapshot's breaker", br, brk)
	if m := br.(map[string]any); m["blocked"] != 3.0 || m["failed"] != 2.0 || m["succeeded"] != 1.0 || m["block_ratio"] != 1.0 || m["state"] != "open" {
		t.Errorf("the breaker: %v, want open, blocking all, 3 blocked, 1 succeeded, 2 failed", br)
	}
	h := objectAt(t, db, "history").(map[string]any)
	rates("the snapshot's newest point", map[string]any{
		"allowed_rate": objectAt(t, h, "allowed_rate", 0), "blocked_rate": objectAt(t, h, "blocked_rate", 0), "failed_rate": objectAt(t, h, "failed_rate", 0),
	}, 3.0, 3.0, 2.0)

	hist := rawJSON(t, f.d, "/api/history?resource=db")
	check("api/history's history", objectAt(t, hist, "history"), columns)
	check("api/history's stats", objectAt(t, hist, "stats"), stats)

	ev, err := readEvent(s.r)
	if err != nil || ev.event != "sample" {
		t.Fatalf("the sample event: %q, %v", ev.event, err)
	}
	var sample any
	if err := json.Unmarshal([]byte(ev.data), &sample); err != nil {
		t.Fatal(err)
	}
	p := objectAt(t, sample, "resources", 0, "point")
	check("an event's point", p, columns)
	rates("an event's point", p, 3.0, 3.0, 2.0)
	check("an event's stats", objectAt(t, sample, "resources", 0, "stats"), stats)
	check("an event's breaker", objectAt(t, sample, "breakers", 0), brk)

	// An error response is still an error message.
	w := httptest.NewRecorder()
	f.d.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/history?resource=nope", nil))
	var e map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !slices.Equal(keys(t, "an error response", e), []string{"error"}) {
		t.Errorf("an error response: %s, want {\"error\": ...}", w.Body)
	}
}
