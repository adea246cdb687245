package echoguard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/echoguard"
)

// A handler that holds its request open, as an event stream does, and
// calls ExitGuard stops counting as in flight while it goes on; one that
// does not call it is in flight until it returns.
func TestALongHeldRequestThatExitsTheGuardIsNoLongerInFlight(t *testing.T) {
	for _, exit := range []bool{true, false} {
		g := newGuard(t, slidegate.Rules{})
		held, release := make(chan struct{}), make(chan struct{})
		e := echo.New()
		e.Use(echoguard.Middleware(g))
		e.GET("/events", func(c echo.Context) error {
			c.Response().WriteHeader(http.StatusOK)
			if exit {
				x, ok := c.Response().Writer.(interface{ ExitGuard() })
				if !ok {
					t.Errorf("the handler's writer %T has no ExitGuard", c.Response().Writer)
				} else {
					x.ExitGuard()
				}
			}
			close(held)
			<-release
			return nil
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/events", nil))
		}()
		<-held
		want := int64(1)
		if exit {
			want = 0
		}
		if s := stats(t, g, "GET /events"); s.InFlight != want {
			t.Errorf("ExitGuard called %v: %d in flight while the handler holds the request, want %d", exit, s.InFlight, want)
		}
		close(release)
		<-done
		if s := stats(t, g, "GET /events"); s.InFlight != 0 || s.Totals.Succeeded != 1 {
			t.Errorf("ExitGuard called %v: after the handler returned, %d in flight and %d succeeded, want 0 and 1", exit, s.InFlight, s.Totals.Succeeded)
		}
	}
}
