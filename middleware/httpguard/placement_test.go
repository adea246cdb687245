package httpguard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// unknownGET is the resource of GET requests that Middleware guards with no
// mux to learn their route from.
const unknownGET = "GET " + httpguard.UnknownRoute

// TestMain keeps the warnings of middleware that cannot learn the route, as
// most tests here place it, out of the tests' output; the tests about the
// warning give their own logger.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// logging stands for any middleware between httpguard and the mux: it
// passes the request on in a copy, as middleware that adds to the context
// does, so the pattern the mux finds never reaches the outer request.
func logging(next http.Handler) http.Handler {
	type key struct{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "logged")))
	})
}

func usersMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(http.ResponseWriter, *http.Request) {})
	return mux
}

// TestMisplacedMiddlewareNamesAnUnknownRoute checks what Middleware does
// around a handler that is not the mux: it cannot learn the route before
// the request is routed, so it names the request by its method and
// UnknownRoute, neither by its raw path nor as NoRoute (a rule on NoRoute,
// meant for scanners, would otherwise hold back every routed request).
func TestMisplacedMiddlewareNamesAnUnknownRoute(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	h := httpguard.Middleware(g, httpguard.WithLogger(slog.New(slog.DiscardHandler)))(logging(usersMux()))
	for _, path := range []string{"/users/1", "/users/2", "/nowhere"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	}
	if s := stats(t, g, unknownGET); s.Allowed != 3 {
		t.Fatalf("%s allowed %d, want 3", unknownGET, s.Allowed)
	}
	if _, ok := g.Stats(httpguard.NoRoute); ok {
		t.Fatalf("a misplaced middleware named requests %s", httpguard.NoRoute)
	}
}

// TestMisplacedMiddlewareWarnsOnce checks that Middleware that cannot learn
// the route says so once, whatever the number of requests, and says how to
// place it.
func TestMisplacedMiddlewareWarnsOnce(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	var log recordingHandler
	h := httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)))(logging(usersMux()))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", fmt.Sprintf("/users/%d-%d", i, j), nil))
			}
		}()
	}
	wg.Wait()
	msgs := log.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d warnings, want 1: %q", len(msgs), msgs)
	}
	if !strings.Contains(msgs[0], "WithMux") {
		t.Errorf("the warning %q does not say how to give the middleware the mux", msgs[0])
	}

	// Placed right, or given the mux, it has nothing to warn about.
	for _, h := range []http.Handler{
		httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)))(usersMux()),
		logging(httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)))(usersMux())),
		httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)), httpguard.WithMux(usersMux()))(logging(usersMux())),
		httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)), httpguard.WithResource(func(*http.Request) string { return "users" }))(logging(usersMux())),
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/users/1", nil))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nowhere", nil))
	}
	if msgs := log.messages(); len(msgs) != 1 {
		t.Fatalf("%d warnings, want still 1: %q", len(msgs), msgs)
	}
}

// TestWithMuxRoutesWhereverMiddlewareIsPlaced checks that a rule on a route
// pattern holds through a middleware between httpguard and the mux when
// httpguard is given the mux: the second request, for another user, is
// blocked.
func TestWithMuxRoutesWhereverMiddlewareIsPlaced(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /users/{id}", Limit: 1}}})
	mux := usersMux()
	h := httpguard.Middleware(g, httpguard.WithMux(mux))(logging(mux))
	var codes []int
	for _, path := range []string{"/users/1", "/users/2", "/nowhere"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		codes = append(codes, w.Code)
	}
	if fmt.Sprint(codes) != "[200 429 404]" {
		t.Fatalf("statuses %v, want [200 429 404]", codes)
	}
	if s := stats(t, g, httpguard.NoRoute); s.Allowed != 1 {
		t.Fatalf("%s allowed %d, want 1", httpguard.NoRoute, s.Allowed)
	}
}

// TestMisplacedMiddlewareUnderAFloodMakesAFewResources sends, as an
// attacker would, 10,000 requests with new paths and new methods through a
// middleware that cannot learn the route: they make at most one resource
// per standard method and one for the others.
func TestMisplacedMiddlewareUnderAFloodMakesAFewResources(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	h := httpguard.Middleware(g, httpguard.WithLogger(slog.New(slog.DiscardHandler)))(logging(usersMux()))
	methods := []string{"GET", "POST", "PROPFIND", "X-%d", "get"}
	for i := range 10000 {
		r := httptest.NewRequest("GET", fmt.Sprintf("/users/%d/%x", i, i*7919), nil)
		m := methods[i%len(methods)]
		if strings.Contains(m, "%d") {
			m = fmt.Sprintf(m, i)
		}
		r.Method = m
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	var names []string
	for _, s := range g.Resources() {
		names = append(names, s.Resource)
		if strings.Contains(s.Resource, "/users/") {
			t.Errorf("resource %q carries a raw path", s.Resource)
		}
	}
	if len(names) > 3 {
		t.Fatalf("10,000 requests made %d resources, want at most 3: %q", len(names), names)
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

// TestWithRoute checks that Middleware names requests by the pattern a
// router's lookup gives, NoRoute when it finds none, and as without the
// option when it cannot tell.
func TestWithRoute(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	var log recordingHandler
	h := httpguard.Middleware(g, httpguard.WithLogger(slog.New(&log)), httpguard.WithRoute(nil), httpguard.WithRoute(func(r *http.Request) (string, bool) {
		switch r.URL.Path {
		case "/found/1", "/found/2":
			return "/found/:n", true
		case "/missing":
			return "", true
		}
		return "", false
	}))(http.NotFoundHandler())
	for _, path := range []string{"/found/1", "/found/2", "/missing", "/unknown", "/unknown/2"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	for name, want := range map[string]int64{"GET /found/:n": 2, httpguard.NoRoute: 1, unknownGET: 2} {
		if s := stats(t, g, name); s.Allowed != want {
			t.Errorf("%s: allowed %d, want %d", name, s.Allowed, want)
		}
	}
	if msgs := log.messages(); len(msgs) != 1 {
		t.Errorf("%d warnings, want 1", len(msgs))
	}
}
