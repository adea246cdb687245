package dashboard

import (
	"net/http"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// A dashboard mounted behind httpguard.Middleware, on the mux it guards,
// keeps its event streams out of the guard: an open stream is no request
// in flight, so an inbound limit of one still lets the service's requests
// through, and its life is no response time.
func TestAStreamBehindTheGuardsMiddlewareHoldsNoPlace(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: slidegate.InboundResource, Type: slidegate.ConcurrencyRule, Limit: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(http.ResponseWriter, *http.Request) {})
	mux.Handle("/slidegate/", http.StripPrefix("/slidegate", f.d))
	srv := newServer(t, httpguard.Middleware(f.g)(mux))

	s := openStream(t, srv.URL+"/slidegate/api/events")
	defer s.close()
	var snap snapshotJSON
	s.next(t, "snapshot", &snap)
	f.clk.Advance(3 * time.Second) // the stream lasts
	f.d.Sample()
	var ev eventJSON
	s.next(t, "sample", &ev)

	if in, _ := f.g.Stats(slidegate.InboundResource); in.InFlight != 0 {
		t.Errorf("%d inbound requests in flight while only a stream is open", in.InFlight)
	}
	resp, err := http.Get(srv.URL + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request beside the open stream got %d, want 200", resp.StatusCode)
	}
	// Once the stream has ended, its request is counted with the time it
	// took to start, not the 3 s it lasted.
	s.close()
	var st slidegate.ResourceStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ = f.g.Stats("GET /slidegate/"); st.InFlight == 0 || time.Now().After(deadline) {
			break
		}
	}
	if st.InFlight != 0 || st.Totals.Allowed != 1 || st.MaxRT >= time.Second {
		t.Errorf("the stream's resource: %d allowed, %d in flight, the slowest took %v; want 1, none, and not the stream's life", st.Totals.Allowed, st.InFlight, st.MaxRT)
	}
}
