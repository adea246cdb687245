package httpguard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func ExampleWithRetry() {
	var calls atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a passing hiccup
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer backend.Close()

	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	// Retries may add 20% to the requests of the last 10 s, and 10 per
	// second more: however the backend fails, this client sends it at most
	// 1.2 times its requests, plus 10 a second.
	budget, err := flow.NewRetryBudget(flow.RetryBudgetSettings{Ratio: 0.2, MinPerSecond: 10})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: httpguard.Transport(g, nil,
		httpguard.WithRetry(budget, httpguard.RetryPolicy{MaxRetries: 3, BaseBackoff: 10 * time.Millisecond}))}

	resp, err := client.Get(backend.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	s, _ := g.Stats("GET " + backend.Listener.Addr().String())
	fmt.Println(resp.StatusCode, "after", calls.Load(), "attempts;", "the guard counted", s.Allowed, "and", s.Failed, "failed")
	// Output:
	// 200 after 2 attempts; the guard counted 2 and 1 failed
}
