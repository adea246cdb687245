package chiguard_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/chiguard"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func init() { chi.RegisterMethod("PROPFIND") }

func newGuard(t testing.TB, rules slidegate.Rules) *slidegate.Guard {
	t.Helper()
	g, err := slidegate.New(slidegate.WithClock(clock.NewManual(int64(time.Hour))))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	return g
}

func stats(t *testing.T, g *slidegate.Guard, name string) slidegate.ResourceStats {
	t.Helper()
	s, ok := g.Stats(name)
	if !ok {
		t.Fatalf("no resource %q; the guard has %q", name, names(g))
	}
	return s
}

func names(g *slidegate.Guard) []string {
	var names []string
	for _, r := range g.Resources() {
		names = append(names, r.Resource)
	}
	return names
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", target, nil)
	r.Method = method
	h.ServeHTTP(w, r)
	return w
}

func one(n int64) *int64 { return &n }

// routes adds to r routes that succeed, fail and panic.
func routes(r chi.Router) {
	r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "user %s", chi.URLParam(r, "id")) })
	r.Get("/fail", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	r.Get("/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	r.Get("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	r.Method("PROPFIND", "/dav", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// router is a chi router with Middleware in its Use, the usual place.
func router(g *slidegate.Guard, opts ...httpguard.Option) *chi.Mux {
	r := chi.NewRouter()
	r.Use(chiguard.Middleware(g, opts...))
	routes(r)
	return r
}

func TestRouteRuleBlocksTheSecondRequestWith429(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/{id}", Limit: 1}}})
	r := router(g)
	if w := serve(r, "GET", "/users/1"); w.Code != 200 || w.Body.String() != "user 1" {
		t.Fatalf("first request: %d %q", w.Code, w.Body)
	}
	w := serve(r, "GET", "/users/2")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request, another id: status %d, want 429", w.Code)
	}
	// The rule's window is a second: a retry waits at most about that.
	if ra := w.Header().Get("Retry-After"); ra != "1" && ra != "2" {
		t.Errorf("Retry-After %q, want 1 or 2 seconds", ra)
	}
	if strings.Contains(w.Body.String(), "user") {
		t.Errorf("a blocked request reached the handler: %q", w.Body)
	}
	if s := stats(t, g, "GET /users/{id}"); s.Allowed != 1 || s.Blocked != 1 {
		t.Errorf("stats %+v, want 1 allowed and 1 blocked", s)
	}
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 1 {
		t.Errorf("inbound allowed %d, want 1: Middleware enters as inbound traffic", in.Allowed)
	}
}

// TestRouteWhereverMiddlewareSits places Middleware in each place chi
// offers, and checks that it names requests by their whole route.
func TestRouteWhereverMiddlewareSits(t *testing.T) {
	for _, tc := range []struct {
		place string
		build func(mw func(http.Handler) http.Handler) http.Handler
		path  string
		want  string
	}{
		{"root Use", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(mw)
			routes(r)
			return r
		}, "/users/1", "GET /users/{id}"},
		{"root Use, mounted router", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Use(mw)
			sub := chi.NewRouter()
			routes(sub)
			r.Mount("/v2", sub)
			return r
		}, "/v2/users/1", "GET /v2/users/{id}"},
		{"sub-router Use", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.Route("/api", func(r chi.Router) {
				r.Use(mw)
				routes(r)
			})
			return r
		}, "/api/users/1", "GET /api/users/{id}"},
		{"inline With", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			r.With(mw).Get("/items/{sku}", func(http.ResponseWriter, *http.Request) {})
			return r
		}, "/items/abc", "GET /items/{sku}"},
		{"around the router", func(mw func(http.Handler) http.Handler) http.Handler {
			r := chi.NewRouter()
			sub := chi.NewRouter()
			routes(sub)
			r.Mount("/v2", sub)
			return mw(r)
		}, "/v2/users/1", "GET /v2/users/{id}"},
	} {
		g := newGuard(t, slidegate.Rules{})
		h := tc.build(chiguard.Middleware(g))
		for _, id := range []string{"1", "2"} {
			if w := serve(h, "GET", strings.Replace(tc.path, "1", id, 1)); w.Code != 200 {
				t.Fatalf("%s: status %d", tc.place, w.Code)
			}
		}
		if s, ok := g.Stats(tc.want); !ok || s.Allowed != 2 {
			t.Errorf("%s: resources %q, want %q with 2 requests", tc.place, names(g), tc.want)
		}
	}
}

// TestOutsideChiTheRouteIsUnknown checks Middleware with no chi router to
// ask: it names requests by their method alone, and warns once.
func TestOutsideChiTheRouteIsUnknown(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	var log recordingHandler
	h := chiguard.Middleware(g, httpguard.WithLogger(slog.New(&log)))(http.NotFoundHandler())
	for i := range 100 {
		serve(h, "GET", fmt.Sprintf("/users/%d", i))
	}
	if s := stats(t, g, "GET (unknown route)"); s.Allowed != 100 {
		t.Errorf("stats %+v, want 100 requests", s)
	}
	if n := len(names(g)); n != 1 {
		t.Errorf("resources %q, want 1", names(g))
	}
	if msgs := log.messages(); len(msgs) != 1 {
		t.Errorf("%d warnings, want 1", len(msgs))
	}
}

func TestWithResourceWins(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	r := router(g, httpguard.WithResource(func(*http.Request) string { return "api" }))
	serve(r, "GET", "/users/1")
	if s := stats(t, g, "api"); s.Allowed != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestOpenBreakerAnswers503(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET /fail", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	r := router(g)
	if w := serve(r, "GET", "/fail"); w.Code != http.StatusBadGateway {
		t.Fatalf("first request: status %d, want the handler's 502", w.Code)
	}
	w := serve(r, "GET", "/fail")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("after a failure: status %d, want 503 from the open breaker", w.Code)
	}
	if w.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After from an open breaker")
	}
	if s := stats(t, g, "GET /fail"); s.Failed != 1 || s.Blocked != 1 {
		t.Errorf("stats %+v, want 1 failure and 1 blocked", s)
	}
}

func TestPanicIsRecordedAndGoesOn(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	r := router(g)
	for _, tc := range []struct {
		path string
		want any
	}{{"/panic", "boom"}, {"/abort", http.ErrAbortHandler}} {
		v := func() (v any) {
			defer func() { v = recover() }()
			serve(r, "GET", tc.path)
			return nil
		}()
		if v != tc.want {
			t.Fatalf("%s: recovered %v, want %v: the panic must go on", tc.path, v, tc.want)
		}
		if s := stats(t, g, "GET "+tc.path); s.Failed != 1 || s.InFlight != 0 {
			t.Fatalf("%s: stats %+v, want 1 failure and none in flight", tc.path, s)
		}
	}
}

func TestKeys(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/{id}", Limit: 1, PerKey: true}}})
	r := router(g, httpguard.KeyFromHeader("X-Api-Key"))
	var codes []int
	for _, key := range []string{"alice", "alice", "bob"} {
		req := httptest.NewRequest("GET", "/users/1", nil)
		req.Header.Set("X-Api-Key", key)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 429 200]" {
		t.Errorf("statuses %v, want [200 429 200]: each key its own limit", codes)
	}
}

// TestAFloodOfPathsAndMethodsMakesAFewResources sends, as an attacker
// would, thousands of requests with new paths and new methods, routed and
// not (404 and 405), to a router with a mounted one: they make no resource
// beyond the router's routes and NoRoute.
func TestAFloodOfPathsAndMethodsMakesAFewResources(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	r := router(g)
	sub := chi.NewRouter()
	routes(sub)
	r.Mount("/v2", sub)
	rnd := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "POST", "PROPFIND", "DELETE", "get", "X"}
	for i := range 5000 {
		method := methods[rnd.IntN(len(methods))]
		if i%7 == 0 {
			method = fmt.Sprintf("M%d", rnd.Uint64())
		}
		path := fmt.Sprintf("/%x/%d", rnd.Uint64(), i)
		switch i % 5 {
		case 0:
			path = fmt.Sprintf("/users/%d", rnd.Uint64())
		case 1:
			path = "/dav"
		case 2:
			path = fmt.Sprintf("/v2/users/%d/x", rnd.Uint64())
		case 3:
			path = fmt.Sprintf("/v2/users/%d", rnd.Uint64())
		}
		serve(r, method, path)
	}
	allowed := map[string]bool{httpguard.NoRoute: true, "GET /users/{id}": true, "_OTHER /dav": true, "GET /v2/users/{id}": true}
	for _, name := range names(g) {
		if !allowed[name] {
			t.Errorf("resource %q is not a route", name)
		}
	}
	if n := len(names(g)); n != len(allowed) {
		t.Errorf("resources %q, want %d", names(g), len(allowed))
	}
}

// recordingHandler keeps the messages logged through it.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// A path chi routes after a middleware rewrote it (StripSlashes, CleanPath)
// is named as chi routes it, wherever Middleware sits: a variant of the path
// must not slip past a rule as an unrouted request.
func TestRewrittenPathsAreNamedAsChiRoutesThem(t *testing.T) {
	for _, place := range []string{"root", "mounted"} {
		t.Run(place, func(t *testing.T) {
			g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{
				{Resource: "GET /users/{id}", Limit: 1}, {Resource: "GET /api/users/{id}", Limit: 1}}})
			r := chi.NewRouter()
			r.Use(middleware.StripSlashes, middleware.CleanPath)
			prefix := ""
			if place == "root" {
				r.Use(chiguard.Middleware(g))
				routes(r)
			} else {
				prefix = "/api"
				r.Route("/api", func(sub chi.Router) {
					sub.Use(chiguard.Middleware(g))
					routes(sub)
				})
			}
			name := "GET " + prefix + "/users/{id}"
			if w := serve(r, "GET", prefix+"/users/1"); w.Code != 200 {
				t.Fatalf("first request: %d", w.Code)
			}
			for _, variant := range []string{prefix + "/users/1/", prefix + "//users//1", prefix + "/x/../users/1"} {
				if w := serve(r, "GET", variant); w.Code != http.StatusTooManyRequests {
					t.Errorf("%s: status %d %q, want 429 from the rule on %s", variant, w.Code, w.Body, name)
				}
			}
			if s := stats(t, g, name); s.Allowed != 1 || s.Blocked != 3 {
				t.Errorf("%s: %+v, want 1 allowed and the 3 variants blocked", name, s)
			}
		})
	}
}

// A HEAD that chi serves with the GET route (middleware.GetHead) counts
// under that route, before or after GetHead.
func TestAHeadServedByAGetRouteCountsUnderIt(t *testing.T) {
	for _, order := range []string{"guard first", "GetHead first"} {
		t.Run(order, func(t *testing.T) {
			g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/{id}", Limit: 1}}})
			r := chi.NewRouter()
			if order == "guard first" {
				r.Use(chiguard.Middleware(g), middleware.GetHead)
			} else {
				r.Use(middleware.GetHead, chiguard.Middleware(g))
			}
			routes(r)
			serve(r, "GET", "/users/1")
			if w := serve(r, "HEAD", "/users/2"); w.Code != http.StatusTooManyRequests {
				t.Errorf("HEAD after a GET at a limit of 1: status %d, want 429", w.Code)
			}
			if s := stats(t, g, "GET /users/{id}"); s.Blocked != 1 {
				t.Errorf("%+v, want the HEAD blocked under the GET route", s)
			}
		})
	}
}
