package httpguard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func ExampleMiddleware() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /hello/{name}", Limit: 2}, // 2 per second
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.PathValue("name"))
	})
	h := httpguard.Middleware(g)(mux) // http.ListenAndServe(addr, h)

	for _, name := range []string{"ann", "bob", "cy"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/hello/"+name, nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After") != "")
	}
	s, _ := g.Stats("GET /hello/{name}")
	fmt.Println("passed", s.Allowed, "blocked", s.Blocked)
	// Output:
	// 200 false
	// 200 false
	// 429 true
	// passed 2 blocked 1
}

// Middleware with other middleware between it and the mux learns the
// routes from the mux it is given.
func ExampleWithMux() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /hello/{name}", Limit: 1}, // 1 per second
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.PathValue("name"))
	})
	logging := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r) // log.Println(r.Method, r.URL.Path) and the like
		})
	}
	h := httpguard.Middleware(g, httpguard.WithMux(mux))(logging(mux))

	for _, name := range []string{"ann", "bob"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/hello/"+name, nil))
		fmt.Println(w.Code)
	}
	// Output:
	// 200
	// 429
}

func ExampleTransport() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway) // a failing dependency
	}))
	defer backend.Close()

	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// After 3 errors in 10 s, fail fast for 5 s.
	minRequests := int64(1)
	_ = g.SetRules(slidegate.Rules{Breakers: []slidegate.BreakerRule{
		{Resource: "GET " + backend.Listener.Addr().String(), Strategy: slidegate.ErrorCountBreaker, Count: 3, MinRequests: &minRequests},
	}})
	client := &http.Client{Transport: httpguard.Transport(g, nil)}
	for range 4 {
		resp, err := client.Get(backend.URL)
		if err != nil {
			fmt.Println(err != nil)
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 502
	// 502
	// 502
	// true
}
