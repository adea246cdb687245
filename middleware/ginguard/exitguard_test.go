package ginguard_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/ginguard"
	"github.com/slidegate/slidegate/middleware/internal/guardtest"
)

// A handler that holds its request open, as an event stream does, and
// calls ExitGuard stops counting as in flight while it goes on; one that
// does not call it is in flight until it returns.
func TestALongHeldRequestThatExitsTheGuardIsNoLongerInFlight(t *testing.T) {
	guardtest.LongHeldRequest(t, func(g *slidegate.Guard, hold func(http.ResponseWriter)) http.Handler {
		e := gin.New()
		e.Use(ginguard.Middleware(g))
		e.GET("/events", func(c *gin.Context) {
			c.Status(http.StatusOK)
			hold(c.Writer)
		})
		return e
	})
}
