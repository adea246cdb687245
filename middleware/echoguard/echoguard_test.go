package echoguard_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/middleware/echoguard"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

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

// server is an echo server guarded by g, with routes that succeed, fail
// and panic.
func server(g *slidegate.Guard, opts ...echoguard.Option) *echo.Echo {
	e := echo.New()
	e.Use(echoguard.Middleware(g, opts...))
	e.GET("/users/:id", func(c echo.Context) error { return c.String(200, "user "+c.Param("id")) })
	e.GET("/fail", func(c echo.Context) error { return c.NoContent(http.StatusBadGateway) })
	e.GET("/fail-returned", func(echo.Context) error { return errors.New("lost the database") })
	e.GET("/gone", func(echo.Context) error { return echo.NewHTTPError(http.StatusGone) })
	e.GET("/panic", func(echo.Context) error { panic("boom") })
	e.GET("/abort", func(echo.Context) error { panic(http.ErrAbortHandler) })
	e.Add("PROPFIND", "/dav", func(c echo.Context) error { return nil })
	return e
}

func TestRouteRuleBlocksTheSecondRequestWith429(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/:id", Limit: 1}}})
	e := server(g)
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

func TestBlockedErrorCarriesTheGuardsError(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/:id", Limit: 0}}})
	e := server(g)
	var got error
	e.HTTPErrorHandler = func(err error, c echo.Context) { got = err; e.DefaultHTTPErrorHandler(err, c) }
	if w := serve(e, "GET", "/users/1"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", w.Code)
	}
	var be *slidegate.BlockError
	if !errors.As(got, &be) || be.Resource != "GET /users/:id" {
		t.Errorf("the error handler got %v, want an *echo.HTTPError wrapping the *slidegate.BlockError", got)
	}
}

func TestOpenBreakerAnswers503(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET /fail", Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	e := server(g)
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

// TestReturnedErrorsCountByTheirStatus checks that an error a handler
// returns, which echo writes after the middleware returned, counts by the
// status it will be written with.
func TestReturnedErrorsCountByTheirStatus(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := server(g)
	if w := serve(e, "GET", "/fail-returned"); w.Code != 500 {
		t.Fatalf("status %d, want 500", w.Code)
	}
	if s := stats(t, g, "GET /fail-returned"); s.Failed != 1 {
		t.Errorf("a returned error: %+v, want a failure", s)
	}
	if w := serve(e, "GET", "/gone"); w.Code != http.StatusGone {
		t.Fatalf("status %d, want 410", w.Code)
	}
	if s := stats(t, g, "GET /gone"); s.Failed != 0 || s.Succeeded != 1 {
		t.Errorf("a returned 410: %+v, want a success", s)
	}
}

func TestPanicIsRecordedAndGoesOn(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := server(g)
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
}

func TestWithIsErrorAndKeyFrom(t *testing.T) {
	g := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/:id", Limit: 1, PerKey: true}}})
	e := server(g,
		echoguard.WithIsError(func(status int) bool { return status == 200 }), echoguard.WithIsError(nil),
		echoguard.KeyFrom(func(c echo.Context) string { return c.Request().Header.Get("X-Api-Key") }))
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
	if s := stats(t, g, "GET /users/:id"); s.Failed != 2 {
		t.Errorf("200 counted as an error: %+v, want 2 failures", s)
	}
}

// TestAFloodOfPathsAndMethodsMakesAFewResources sends, as an attacker
// would, thousands of requests with new paths and new methods, routed and
// not (404 and 405): they make no resource beyond the server's routes and
// NoRoute.
func TestAFloodOfPathsAndMethodsMakesAFewResources(t *testing.T) {
	g := newGuard(t, slidegate.Rules{})
	e := server(g)
	rnd := rand.New(rand.NewPCG(1, 2))
	methods := []string{"GET", "POST", "PROPFIND", "DELETE", "get", "X"}
	for i := range 5000 {
		method := methods[rnd.IntN(len(methods))]
		if i%7 == 0 {
			method = fmt.Sprintf("M%d", rnd.Uint64())
		}
		path := fmt.Sprintf("/%x/%d", rnd.Uint64(), i)
		switch i % 4 {
		case 0:
			path = fmt.Sprintf("/users/%d", rnd.Uint64())
		case 1:
			path = "/dav"
		case 2:
			path = fmt.Sprintf("/users/%d/x", rnd.Uint64())
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
