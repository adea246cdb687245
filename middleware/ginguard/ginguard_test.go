package ginguard_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/ginguard"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func init() { gin.SetMode(gin.TestMode) }

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
		var names []string
		for _, r := range g.Resources() {
			names = append(names, r.Resource)
		}
		t.Fatalf("no resource %q; the guard has %q", name, names)
	}
	return s
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", target, nil)
	r.Method = method
	h.ServeHTTP(w, r)
	return w
}

func one(n int64) *int64 { return &n }

// engine is a gin engine guarded by g, with routes that succeed, fail and
// panic.
func engine(g *slidegate.Guard, opts ...ginguard.Option) *gin.Engine {
	e := gin.New()
	e.Use(ginguard.Middleware(g, opts...))
	e.GET("/users/:id", func(c *gin.Context) { c.String(200, "user %s", c.Param("id")) })
	e.GET("/fail", func(c *gin.Context) { c.Status(http.StatusBadGateway) })
	e.GET("/panic", func(*gin.Context) { panic("boom") })
	e.GET("/abort", func(*gin.Context) { panic(http.ErrAbortHandler) })
	e.GET("/error", func(c *gin.Context) { _ = c.Error(errors.New("lost the database")); c.Status(200) })
	e.POST("/bind", func(c *gin.Context) {
		var v struct {
			N int `json:"n" binding:"required"`
		}
		_ = c.Bind(&v) // a 400, and an error of type gin.ErrorTypeBind
	})
	e.POST("/orders", func(c *gin.Context) {
		var v struct {
			N int `json:"n" binding:"required"`
		}
		if err := c.ShouldBindJSON(&v); err != nil {
			_ = c.AbortWithError(http.StatusBadRequest, err) // gin's usual way: an error of type gin.ErrorTypePrivate
		}
	})
	e.Handle("PROPFIND", "/dav", func(c *gin.Context) {})
	return e
}

func TestRouteRuleBlocksTheSecondRequestWith429(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/:id", Limit: 1}}})
	e := engine(g)
	if w := serve(e, "GET", "/users/1"); w.Code != 200 || w.Body.String() != "user 1" {
		t.Fatalf("first request: %d %q", w.Code, w.Body)
	}
	w := serve(e, "GET", "/users/2")
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
	if s := stats(t, g, "GET /users/:id"); s.Allowed != 1 || s.Blocked != 1 {
		t.Errorf("stats %+v, want 1 allowed and 1 blocked", s)
	}
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 1 {
		t.Errorf("inbound allowed %d, want 1: Middleware enters as inbound traffic", in.Allowed)
	}
}

func TestOpenBreakerAnswers503(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET /fail", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	e := engine(g)
	if w := serve(e, "GET", "/fail"); w.Code != http.StatusBadGateway {
		t.Fatalf("first request: status %d, want the handler's 502", w.Code)
	}
	w := serve(e, "GET", "/fail")
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
	e := engine(g)
	for _, tc := range []struct {
		path string
		want any
	}{{"/panic", "boom"}, {"/abort", http.ErrAbortHandler}} {
		v := func() (v any) {
			defer func() { v = recover() }()
			serve(e, "GET", tc.path)
			return nil
		}()
		if v != tc.want {
			t.Fatalf("%s: recovered %v, want %v: the panic must go on", tc.path, v, tc.want)
		}
		if s := stats(t, g, "GET "+tc.path); s.Failed != 1 || s.InFlight != 0 {
			t.Fatalf("%s: stats %+v, want 1 failure and none in flight", tc.path, s)
		}
	}
	// Only the panic counts for breakers; an abort is a client gone away.
	g = newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET /abort", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	e = engine(g)
	for range 2 {
		func() {
			defer func() { _ = recover() }()
			serve(e, "GET", "/abort")
		}()
	}
	if s := stats(t, g, "GET /abort"); s.Blocked != 0 {
		t.Errorf("aborts opened the breaker: %+v", s)
	}
}

func TestContextErrorsAreFailuresButBindErrorsAreNot(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := engine(g)
	serve(e, "GET", "/error")
	if s := stats(t, g, "GET /error"); s.Failed != 1 {
		t.Errorf("a handler's c.Error: stats %+v, want a failure", s)
	}
	if w := serve(e, "POST", "/bind"); w.Code != http.StatusBadRequest {
		t.Fatalf("a body that does not bind: status %d, want 400", w.Code)
	}
	if s := stats(t, g, "POST /bind"); s.Failed != 0 || s.Succeeded != 1 {
		t.Errorf("a client's bad body: stats %+v, want a success: clients must not open breakers", s)
	}
	for range 5 {
		if w := serve(e, "POST", "/orders"); w.Code != http.StatusBadRequest {
			t.Fatalf("a request refused with AbortWithError(400, err): status %d", w.Code)
		}
	}
	if s := stats(t, g, "POST /orders"); s.Failed != 0 || s.Succeeded != 5 {
		t.Errorf("requests refused with a 4xx and an error attached: stats %+v, want 5 successes: clients must not open breakers", s)
	}
}

func TestWithIsError(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := engine(g, ginguard.WithIsError(func(status int) bool { return status == 200 }), ginguard.WithIsError(nil))
	serve(e, "GET", "/users/1")
	serve(e, "GET", "/fail")
	if s := stats(t, g, "GET /users/:id"); s.Failed != 1 {
		t.Errorf("200 counted as an error: %+v, want a failure", s)
	}
	if s := stats(t, g, "GET /fail"); s.Failed != 0 {
		t.Errorf("502 not counted as an error: %+v, want no failure", s)
	}
}

func TestKeyFrom(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/:id", Limit: 1, PerKey: true}}})
	e := engine(g, ginguard.KeyFrom(func(c *gin.Context) string { return c.GetHeader("X-Api-Key") }))
	var codes []int
	for _, key := range []string{"alice", "alice", "bob"} {
		r := httptest.NewRequest("GET", "/users/1", nil)
		r.Header.Set("X-Api-Key", key)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 429 200]" {
		t.Errorf("statuses %v, want [200 429 200]: each key its own limit", codes)
	}
}

// TestAFloodOfPathsAndMethodsMakesAFewResources sends, as an attacker
// would, thousands of requests with new paths and new methods, routed and
// not (404 and 405): they make no resource beyond the engine's routes and NoRoute.
func TestAFloodOfPathsAndMethodsMakesAFewResources(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := engine(g)
	e.HandleMethodNotAllowed = true // 405 for a method a path has no route for
	rnd := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "POST", "PROPFIND", "DELETE", "get", "X"}
	for i := range 5000 {
		method := methods[rnd.IntN(len(methods))]
		if i%7 == 0 {
			method = fmt.Sprintf("M%d", rnd.Uint64())
		}
		path := fmt.Sprintf("/%x/%d", rnd.Uint64(), i)
		switch i % 3 {
		case 0:
			path = fmt.Sprintf("/users/%d", rnd.Uint64())
		case 1:
			path = "/dav"
		}
		serve(e, method, path)
	}
	allowed := map[string]bool{httpguard.NoRoute: true, "GET /users/:id": true, "_OTHER /dav": true}
	var names []string
	for _, s := range g.Resources() {
		names = append(names, s.Resource)
		if !allowed[s.Resource] {
			t.Errorf("resource %q is not a route", s.Resource)
		}
	}
	if len(names) != len(allowed) {
		t.Errorf("resources %q, want %d", names, len(allowed))
	}
}
