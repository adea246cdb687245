package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func newGuard(t *testing.T, rules slidegate.Rules) (*slidegate.Guard, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(int64(time.Hour))
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(rules); err != nil {
		t.Fatal(err)
	}
	return g, clk
}

func one(n int64) *int64 { return &n }

// serve sends a request for method and target through h and returns the
// response.
func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
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

func TestRouteResourceFromTheMux(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/static/", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST example.com/x", func(w http.ResponseWriter, r *http.Request) {})
	h := httpguard.Middleware(g)(mux)

	serve(h, "GET", "/users/1")
	serve(h, "GET", "/users/2")
	serve(h, "HEAD", "/static/a.css")
	serve(h, "POST", "http://example.com/x")
	if w := serve(h, "GET", "/nowhere"); w.Code != http.StatusNotFound {
		t.Fatalf("unrouted request: status %d, want 404", w.Code)
	}
	for name, want := range map[string]int64{
		"GET /users/{id}":    2,
		"HEAD /static/":      1,
		"POST example.com/x": 1,
		httpguard.NoRoute:    1,
	} {
		s := stats(t, g, name)
		if s.Allowed != want || s.Succeeded != want || s.Failed != 0 {
			t.Errorf("%s: %+v, want %d passed and succeeded", name, s, want)
		}
	}
	if in, _ := g.Stats(slidegate.InboundResource); in.Allowed != 5 {
		t.Errorf("inbound passes = %d, want 5 (the middleware enters as inbound traffic)", in.Allowed)
	}
}

func TestRouteResourceOfANestedMux(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	inner := http.NewServeMux()
	inner.HandleFunc("GET /api/users/{id}", func(http.ResponseWriter, *http.Request) {})
	outer := http.NewServeMux()
	outer.Handle("/api/", httpguard.Middleware(g)(inner)) // the outer mux sets r.Pattern to "/api/"
	serve(outer, "GET", "/api/users/7")
	if s := stats(t, g, "GET /api/users/{id}"); s.Allowed != 1 {
		t.Errorf("stats %+v", s)
	}
	if _, ok := g.Stats("GET /api/"); ok {
		t.Error("named by the outer mux's pattern")
	}
}

func TestRouteResourceInsideARoute(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	mux := http.NewServeMux()
	mw := httpguard.Middleware(g)
	mux.Handle("GET /a/{x}", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("/b", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	serve(mux, "GET", "/a/1")
	serve(mux, "PUT", "/b")
	stats(t, g, "GET /a/{x}")
	stats(t, g, "PUT /b")

	// Without a mux, the route is unknown: a path is not a name.
	plain := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	serve(plain, "DELETE", "/c/d")
	serve(plain, "GET", "/e")
	serve(plain, "GET", "/f")
	if s := stats(t, g, "DELETE "+httpguard.UnknownRoute); s.Allowed != 1 {
		t.Errorf("DELETE %s: %+v, want one request", httpguard.UnknownRoute, s)
	}
	if s := stats(t, g, unknownGET); s.Allowed != 2 {
		t.Errorf("%s: %+v, want two requests", unknownGET, s)
	}
}

func TestFlowBlockIs429WithRetryAfter(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /x", Limit: 1, Interval: slidegate.Duration(2500 * time.Millisecond)},
	}})
	var calls int
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(http.ResponseWriter, *http.Request) { calls++ })
	h := httpguard.Middleware(g)(mux)

	if w := serve(h, "GET", "/x"); w.Code != http.StatusOK {
		t.Fatalf("first request: %d", w.Code)
	}
	clk.Advance(time.Second)
	w := serve(h, "GET", "/x")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: status %d, want 429", w.Code)
	}
	// 1.5 s to go (bucket-rounded up to at most 1.6 s): 2 whole seconds.
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	if calls != 1 {
		t.Errorf("the handler ran %d times, want 1: a refused request must not reach it", calls)
	}
	if s := stats(t, g, "GET /x"); s.Allowed != 1 || s.Blocked != 1 {
		t.Errorf("stats %+v, want 1 pass and 1 block", s)
	}
}

func TestConcurrencyBlockIs429WithoutRetryAfter(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /slow", Type: slidegate.ConcurrencyRule, Limit: 1},
	}})
	mux := http.NewServeMux()
	var inner *httptest.ResponseRecorder
	var h http.Handler
	mux.HandleFunc("GET /slow", func(http.ResponseWriter, *http.Request) {
		if inner == nil {
			inner = serve(h, "GET", "/slow") // a second request while the first is in flight
		}
	})
	h = httpguard.Middleware(g)(mux)
	serve(h, "GET", "/slow")
	if inner.Code != http.StatusTooManyRequests || inner.Header().Get("Retry-After") != "" {
		t.Fatalf("request over the concurrency limit: %d, Retry-After %q; want 429 without Retry-After",
			inner.Code, inner.Header().Get("Retry-After"))
	}
}

func TestServerErrorsTripTheBreakerThen503(t *testing.T) {
	g, clk := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET /dep", Strategy: slidegate.ErrorCountBreaker, Count: 2, MinRequests: one(1),
			OpenTimeout: slidegate.Duration(5 * time.Second)},
	}})
	status := http.StatusInternalServerError
	mux := http.NewServeMux()
	mux.HandleFunc("GET /dep", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
	h := httpguard.Middleware(g)(mux)

	for range 2 {
		if w := serve(h, "GET", "/dep"); w.Code != http.StatusInternalServerError {
			t.Fatalf("status %d", w.Code)
		}
	}
	w := serve(h, "GET", "/dep")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("after two 500s: %d, Retry-After %q; want 503 and 5", w.Code, w.Header().Get("Retry-After"))
	}
	if s := stats(t, g, "GET /dep"); s.Failed != 2 || s.Blocked != 1 {
		t.Errorf("stats %+v, want 2 errors and 1 block", s)
	}
	clk.Advance(5 * time.Second)
	status = http.StatusOK
	if w := serve(h, "GET", "/dep"); w.Code != http.StatusOK {
		t.Fatalf("the probe after the open timeout: %d", w.Code)
	}
}

func TestWhichStatusesAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []httpguard.Option
		status  int
		isError bool
	}{
		{"500", nil, 500, true},
		{"503", nil, 503, true},
		{"404", nil, 404, false},
		{"429", nil, 429, false},
		{"nothing written", nil, 0, false},
		{"custom: 429", []httpguard.Option{httpguard.WithIsError(func(s int) bool { return s == 429 })}, 429, true},
		{"custom: 500", []httpguard.Option{httpguard.WithIsError(func(s int) bool { return s == 429 })}, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGuard(t, slidegate.Rules{})
			h := httpguard.Middleware(g, tc.opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
			}))
			serve(h, "GET", "/")
			s := stats(t, g, unknownGET)
			if (s.Failed == 1) != tc.isError || s.Succeeded+s.Failed != 1 || s.InFlight != 0 {
				t.Errorf("stats %+v; want an error: %v", s, tc.isError)
			}
		})
	}
}

func TestStatusIsTheFinalOne(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	h := httpguard.Middleware(g)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints) // informational: not the status
		_, _ = io.WriteString(w, "hello")    // 200
		w.WriteHeader(http.StatusInternalServerError)
	}))
	serve(h, "GET", "/")
	if s := stats(t, g, unknownGET); s.Succeeded != 1 {
		t.Errorf("stats %+v, want a success: the response went out as 200", s)
	}
}

func TestPanicIsRecordedAndGoesOn(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: unknownGET, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	var panicky any = "boom"
	h := httpguard.Middleware(g)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(panicky) }))
	recovered := func() (v any) {
		defer func() { v = recover() }()
		serve(h, "GET", "/")
		return nil
	}

	// An abort is an error in the statistics, but not for the breaker.
	panicky = http.ErrAbortHandler
	if v := recovered(); v != http.ErrAbortHandler {
		t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
	}
	if s := stats(t, g, unknownGET); s.Failed != 1 || s.InFlight != 0 {
		t.Fatalf("after an abort: %+v, want 1 error, none in flight", s)
	}
	panicky = "boom"
	if v := recovered(); v != "boom" {
		t.Fatalf("recovered %v, want boom: the panic must go on", v)
	}
	if s := stats(t, g, unknownGET); s.Failed != 2 || s.InFlight != 0 {
		t.Fatalf("after a panic: %+v, want 2 errors, none in flight", s)
	}
	// The panic, not the abort, tripped the breaker.
	if w := serve(h, "GET", "/"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("after the panic: %d, want 503 (breaker open)", w.Code)
	}
}

func TestBlockedHandler(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: unknownGET, Limit: 0}}})
	var got error
	h := httpguard.Middleware(g, httpguard.WithBlockedHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	}))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := serve(h, "GET", "/"); w.Code != http.StatusTeapot {
		t.Fatalf("status %d, want the custom handler's 418", w.Code)
	}
	var be *slidegate.BlockError
	if !errors.As(got, &be) || be.Resource != unknownGET || be.Rule != "qps" || be.Reason != flow.ExceedsLimit {
		t.Fatalf("the handler got %v", got)
	}
}

func TestCustomResourceAndEntryOptions(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	h := httpguard.Middleware(g,
		httpguard.WithResource(func(r *http.Request) string { return "tenant:" + r.Header.Get("X-Tenant") }),
		httpguard.WithEntryOptions(func(r *http.Request) []slidegate.EntryOption {
			return []slidegate.EntryOption{slidegate.WithCount(3)}
		}),
	)(http.NewServeMux()) // a custom name wins over the mux's pattern
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Tenant", "acme")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if s := stats(t, g, "tenant:acme"); s.Allowed != 3 {
		t.Errorf("stats %+v, want 3 passes (WithCount(3))", s)
	}
}

func TestFlushAndHijackPassThrough(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part")
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		_ = buf.Flush()
	})
	mux.HandleFunc("GET /controller", func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the middleware: %v", err)
		}
	})
	srv := httptest.NewServer(httpguard.Middleware(g)(mux))
	defer srv.Close()
	for _, path := range []string{"/stream", "/hijack", "/controller"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	// The client has its response before the hijacking handler returns and
	// the middleware exits: wait for the exit.
	deadline := time.Now().Add(5 * time.Second)
	for stats(t, g, "GET /hijack").InFlight != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := stats(t, g, "GET /hijack"); s.Succeeded != 1 || s.InFlight != 0 {
		t.Errorf("hijacked: %+v", s)
	}
}

func TestTransport(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	name := "GET " + host
	g, _ := newGuard(t, slidegate.Rules{
		Flow:     []slidegate.FlowRule{{Resource: name, Limit: 3}},
		Breakers: []slidegate.BreakerRule{{Resource: "POST " + host, Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)}},
	})
	client := &http.Client{Transport: httpguard.Transport(g, nil)}
	get := func(path string) (*http.Response, error) {
		resp, err := client.Get(srv.URL + path)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	if _, err := get("/ok"); err != nil {
		t.Fatal(err)
	}
	if resp, err := get("/fail"); err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("a 502 must reach the caller: %v %v", resp, err)
	}
	if s := stats(t, g, name); s.Succeeded != 1 || s.Failed != 1 {
		t.Fatalf("stats %+v, want 1 success and 1 error (the 502)", s)
	}
	// Refused without reaching the network.
	get("/ok")
	before := hits.Load()
	_, err := get("/ok")
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Reason != flow.RateLimited {
		t.Fatalf("over the limit: %v, want a *slidegate.BlockError", err)
	}
	if hits.Load() != before {
		t.Errorf("a refused request reached the server")
	}

	// A transport error counts: it trips the breaker on POST, and the body
	// of the refused request is closed.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	g2, _ := newGuard(t, slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "POST " + strings.TrimPrefix(deadURL, "http://"), Strategy: slidegate.ErrorCountBreaker, Count: 1, MinRequests: one(1)},
	}})
	client2 := &http.Client{Transport: httpguard.Transport(g2, nil)}
	if _, err := client2.Post(deadURL, "text/plain", strings.NewReader("x")); err == nil {
		t.Fatal("a request to a closed server succeeded")
	}
	body := &closeRecorder{Reader: strings.NewReader("x")}
	_, err = client2.Post(deadURL, "text/plain", body)
	if !errors.As(err, &be) || be.Reason != flow.BreakerOpen {
		t.Fatalf("after a transport error: %v, want the breaker open", err)
	}
	if !body.closed {
		t.Error("the refused request's body was not closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestBlockedStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
	}{
		{"limit", &slidegate.BlockError{Reason: flow.ExceedsLimit, RetryAfter: 1500 * time.Millisecond}, 429, "2"},
		{"limit, no retry time", &slidegate.BlockError{Reason: flow.ExceedsLimit}, 429, ""},
		{"breaker", fmt.Errorf("wrapped: %w", &slidegate.BlockError{Reason: flow.BreakerOpen, RetryAfter: time.Second}), 503, "1"},
		{"overload", &slidegate.BlockError{Reason: flow.Overloaded}, 503, ""},
		{"context", context.DeadlineExceeded, 503, ""},
	} {
		status, retryAfter := httpguard.BlockedStatus(tc.err)
		if status != tc.status || retryAfter != tc.retryAfter {
			t.Errorf("%s: BlockedStatus = %d, %q, want %d, %q", tc.name, status, retryAfter, tc.status, tc.retryAfter)
		}
	}
}
