package chiguard_test

import (
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/chiguard"
	"github.com/slidegate/slidegate/middleware/internal/guardtest"
)

// A handler that holds its request open, as an event stream does, and
// calls ExitGuard stops counting as in flight while it goes on; one that
// does not call it is in flight until it returns.
func TestALongHeldRequestThatExitsTheGuardIsNoLongerInFlight(t *testing.T) {
	guardtest.LongHeldRequest(t, func(g *slidegate.Guard, hold func(http.ResponseWriter)) http.Handler {
		r := chi.NewRouter()
		r.Use(chiguard.Middleware(g))
		r.Get("/events", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			hold(w)
		})
		return r
	})
}
