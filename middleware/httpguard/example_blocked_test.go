package httpguard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// A JSON API answers a blocked request in JSON: the status and Retry-After
// of BlockedStatus, and a body its clients can read.
func ExampleWithBlockedHandler() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /orders", Limit: 1}, // 1 per second
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"orders":[]}`)
	})
	blocked := httpguard.WithBlockedHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
		status, retryAfter := httpguard.BlockedStatus(err)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": http.StatusText(status)})
	})
	h := httpguard.Middleware(g, blocked)(mux)

	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/orders", nil))
		fmt.Print(w.Code, " ", w.Header().Get("Content-Type"), " ", w.Body.String())
	}
	// Output:
	// 200 application/json {"orders":[]}
	// 429 application/json {"error":"Too Many Requests"}
}
