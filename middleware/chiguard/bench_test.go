package chiguard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/chiguard"
)

// discard is a ResponseWriter that allocates nothing.
type discard struct{ h http.Header }

func (w discard) Header() http.Header         { return w.h }
func (w discard) Write(p []byte) (int, error) { return len(p), nil }
func (w discard) WriteHeader(int)             {}

// BenchmarkRouter serves a routed request through chi, without the guard
// and with it (a QPS rule and a breaker on the route).
func BenchmarkRouter(b *testing.B) {
	for _, guarded := range []bool{false, true} {
		name := "bare"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			r := chi.NewRouter()
			if guarded {
				g := newGuard(b, slidegate.Rules{
					Flow:     []slidegate.FlowRule{{Resource: "GET /users/{id}", Limit: 1 << 31}},
					Breakers: []slidegate.BreakerRule{{Resource: "GET /users/{id}", Strategy: slidegate.ErrorRatioBreaker, Threshold: 0.5}},
				})
				r.Use(chiguard.Middleware(g))
			}
			r.Get("/users/{id}", func(http.ResponseWriter, *http.Request) {})
			req := httptest.NewRequest("GET", "/users/7", nil)
			w := discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r.ServeHTTP(w, req)
			}
		})
	}
}
