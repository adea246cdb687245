package echoguard_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/echoguard"
	"github.com/slidegate/slidegate/middleware/internal/guardtest"
)

// A handler that holds its request open, as an event stream does, and
// calls ExitGuard stops counting as in flight while it goes on; one that
// does not call it is in flight until it returns.
func TestALongHeldRequestThatExitsTheGuardIsNoLongerInFlight(t *testing.T) {
	guardtest.LongHeldRequest(t, func(g *slidegate.Guard, hold func(http.ResponseWriter)) http.Handler {
		e := echo.New()
		e.Use(echoguard.Middleware(g))
		e.GET("/events", func(c echo.Context) error {
			c.Response().WriteHeader(http.StatusOK)
			hold(c.Response().Writer)
			return nil
		})
		return e
	})
}
