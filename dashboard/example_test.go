package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/clock"
	"github.com/slidegate/slidegate/dashboard"
)

func Example() {
	// A guard and its dashboard on a manual clock, sampled by hand; a
	// service would write dashboard.New(g) and let it sample every second.
	clk := clock.NewManual(0)
	g, err := slidegate.New(slidegate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{{Resource: "GET /orders", Limit: 25}}})
	d, err := dashboard.New(g, dashboard.WithInterval(0))
	if err != nil {
		panic(err)
	}
	defer d.Close()

	mux := http.NewServeMux()
	mux.Handle("/slidegate/", http.StripPrefix("/slidegate", d))

	// One second of traffic: 30 requests, 25 allowed, 5 of them failing.
	for i := range 30 {
		_ = g.Do(context.Background(), "GET /orders", func() error {
			if i%5 == 0 {
				return errors.New("out of stock")
			}
			return nil
		})
	}
	clk.Advance(time.Second)
	d.Sample()

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/slidegate/api/snapshot", nil))
	var snap struct {
		Resources []struct {
			Name    string
			History struct {
				AllowedRate []float64 `json:"allowed_rate"`
				BlockedRate []float64 `json:"blocked_rate"`
				FailedRate  []float64 `json:"failed_rate"`
			}
		}
	}
	_ = json.Unmarshal(w.Body.Bytes(), &snap)
	for _, r := range snap.Resources {
		h := r.History
		fmt.Printf("%s: %v allowed/s, %v blocked/s, %v failed/s\n", r.Name, h.AllowedRate[0], h.BlockedRate[0], h.FailedRate[0])
	}
	// Output:
	// GET /orders: 25 allowed/s, 5 blocked/s, 5 failed/s
}
