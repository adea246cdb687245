package chiguard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/go-chi/chi/v5"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/chiguard"
)

func ExampleMiddleware() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /api/hello/{name}", Limit: 2}, // 2 per second
	}})
	r := chi.NewRouter()
	r.Use(chiguard.Middleware(g)) // before routing: it asks the router for the route
	r.Route("/api", func(r chi.Router) {
		r.Get("/hello/{name}", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello, %s", chi.URLParam(r, "name"))
		})
	})

	for _, name := range []string{"ann", "bob", "cy"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/api/hello/"+name, nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 false
	// 200 false
	// 429 true
}
