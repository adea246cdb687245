package slidegate

import (
	"errors"
	"testing"

	"github.com/slidegate/slidegate/flow"

	"github.com/slidegate/slidegate/clock"
)

// TestInboundMarksTheResourceForGood checks that a resource is inbound
// once any request entered it with Inbound, allowed or blocked, and stays
// so whatever enters it after; and that the others are outbound.
func TestInboundMarksTheResourceForGood(t *testing.T) {
	g, err := New(WithClock(clock.NewManual(0))) // the rule's second never ends
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRules(Rules{Flow: []FlowRule{{Resource: "refused", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	inbound := func(name string) bool {
		t.Helper()
		s, ok := g.Stats(name)
		if !ok {
			t.Fatalf("no statistics for %q", name)
		}
		return s.Inbound
	}

	mustEnter(t, g, "GET /orders", WithInbound()).Exit(nil)
	mustEnter(t, g, "mysql:orders").Exit(nil)
	if !inbound("GET /orders") {
		t.Error("a resource entered with WithInbound reads outbound")
	}
	for _, name := range []string{"mysql:orders"} {
		if inbound(name) {
			t.Errorf("%q, never entered with WithInbound, reads inbound", name)
		}
	}

	mustEnter(t, g, "GET /orders").Exit(nil)
	if !inbound("GET /orders") {
		t.Error("an outbound request made an inbound resource outbound again")
	}
	mustEnter(t, g, "mysql:orders", WithInbound()).Exit(nil)
	if !inbound("mysql:orders") {
		t.Error("the first inbound request did not make an outbound resource inbound")
	}

	mustEnter(t, g, "refused").Exit(nil) // the rule's one place this second
	if inbound("refused") {
		t.Fatal("refused reads inbound before any inbound request")
	}
	if _, err := g.Enter(bg, "refused", WithInbound()); !errors.Is(err, flow.ErrBlocked) {
		t.Fatalf("the second request in a second: %v, want blocked", err)
	}
	if !inbound("refused") {
		t.Error("a blocked inbound request did not mark its resource inbound")
	}

	if in, _ := g.Stats(InboundResource); !in.Inbound {
		t.Error("the guard's inbound traffic reads outbound")
	}
	for _, s := range g.Resources() {
		if want := s.Resource == "GET /orders" || s.Resource == "mysql:orders" || s.Resource == "refused"; s.Inbound != want {
			t.Errorf("Resources: %q Inbound %v, want %v", s.Resource, s.Inbound, want)
		}
	}
}
