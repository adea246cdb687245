// Package guardtest holds the tests the router adapters share, written
// once: each adapter's test mounts its router and calls them.
package guardtest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slidegate/slidegate"
)

// LongHeldRequest checks ExitGuard through a router's middleware. mount
// returns a handler that serves "GET /events" through the middleware on
// g; the route's handler writes 200, then calls hold with the
// http.ResponseWriter it sees, and returns when hold does. A request that
// calls ExitGuard stops counting as in flight while its handler goes on;
// one that does not is in flight until the handler returns.
func LongHeldRequest(t *testing.T, mount func(g *slidegate.Guard, hold func(w http.ResponseWriter)) http.Handler) {
	t.Helper()
	const resource = "GET /events"
	for _, exit := range []bool{true, false} {
		g, err := slidegate.New()
		if err != nil {
			t.Fatal(err)
		}
		held, release := make(chan struct{}), make(chan struct{})
		h := mount(g, func(w http.ResponseWriter) {
			if exit {
				if x, ok := w.(interface{ ExitGuard() }); !ok {
					t.Errorf("the handler's writer %T has no ExitGuard", w)
				} else {
					x.ExitGuard()
				}
			}
			close(held)
			<-release
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/events", nil))
		}()
		<-held
		want := int64(1)
		if exit {
			want = 0
		}
		if s, _ := g.Stats(resource); s.InFlight != want {
			t.Errorf("ExitGuard called %v: %d in flight while the handler holds the request, want %d", exit, s.InFlight, want)
		}
		close(release)
		<-done
		if s, _ := g.Stats(resource); s.InFlight != 0 || s.Totals.Succeeded != 1 {
			t.Errorf("ExitGuard called %v: after the handler returned, %d in flight and %d succeeded, want 0 and 1", exit, s.InFlight, s.Totals.Succeeded)
		}
	}
}
