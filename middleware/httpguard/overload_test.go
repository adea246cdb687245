package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

func TestStatusErrorOverloadedFor429And503Only(t *testing.T) {
	for status := 100; status <= 599; status++ {
		err := &httpguard.StatusError{Status: status}
		want := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
		if got := err.Overloaded(); got != want {
			t.Errorf("StatusError{%d}.Overloaded() = %v, want %v", status, got, want)
		}
		if got := slidegate.IsOverloaded(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("IsOverloaded(wrapped StatusError{%d}) = %v, want %v", status, got, want)
		}
	}
}

func TestOverloadBlockIs503(t *testing.T) {
	for _, tc := range []struct {
		retryAfter time.Duration
		header     string
	}{
		{0, ""},
		{1500 * time.Millisecond, "2"},
	} {
		w := httptest.NewRecorder()
		be := &slidegate.BlockError{Resource: "GET /x", Rule: "flow[0]", Reason: flow.Overloaded, RetryAfter: tc.retryAfter}
		httpguard.WriteBlocked(w, httptest.NewRequest("GET", "/x", nil), be)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != tc.header {
			t.Errorf("overloaded, retry after %v: status %d, Retry-After %q; want 503 and %q",
				tc.retryAfter, w.Code, w.Header().Get("Retry-After"), tc.header)
		}
	}
}

// adaptiveRules hold the requests in flight to one, so that a request
// entered by hand makes the next one blocked as Overloaded.
func adaptiveRules(resource string) slidegate.Rules {
	return slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: resource, Type: slidegate.AdaptiveRule, Limit: 1, MinLimit: 1, MaxLimit: 1,
	}}}
}

func TestMiddlewareAnswers503WhenTheServiceIsOverloaded(t *testing.T) {
	g, _ := newGuard(t, adaptiveRules(slidegate.InboundResource))
	served := 0
	h := httpguard.Middleware(g, httpguard.WithResource(func(*http.Request) string { return "GET /x" }))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	// A request in flight holds the one place the (inbound) rule allows.
	e, err := g.Enter(context.Background(), "GET /x", slidegate.WithInbound())
	if err != nil {
		t.Fatal(err)
	}
	w := serve(h, "GET", "/x")
	if w.Code != http.StatusServiceUnavailable || served != 0 {
		t.Fatalf("request over the (inbound) adaptive limit: status %d, served %d; want 503 and not served", w.Code, served)
	}
	if body := w.Body.String(); !strings.Contains(body, "Service Unavailable") {
		t.Errorf("body %q, want the status's text", body)
	}
	if n := stats(t, g, "GET /x").Totals.BlockedBy[flow.Overloaded]; n != 1 {
		t.Errorf("blocked as overloaded: %d, want 1", n)
	}
	// The (inbound) rule shares its limit among resources: another route
	// gets its share while GET /x holds the whole limit.
	other := httpguard.Middleware(g, httpguard.WithResource(func(*http.Request) string { return "GET /other" }))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := serve(other, "GET", "/other"); w.Code != http.StatusOK {
		t.Fatalf("another route while GET /x holds the limit: status %d, want 200", w.Code)
	}
	e.Exit(nil)
	if w := serve(h, "GET", "/x"); w.Code != http.StatusOK || served != 1 {
		t.Fatalf("after the request in flight ended: status %d, served %d; want 200 and served", w.Code, served)
	}
}

// adaptiveLimitAfter sends 40 requests one after another through
// Transport to a downstream that answers status, each taking 10 ms on the
// guard's clock, and returns the adaptive rule's limit then.
func adaptiveLimitAfter(t *testing.T, status int) int64 {
	t.Helper()
	const resource = "GET downstream"
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: resource, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clk.Advance(10 * time.Millisecond)
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	c := &http.Client{Transport: httpguard.Transport(g, base, httpguard.WithResource(func(*http.Request) string { return resource }))}
	for range 40 {
		resp, err := c.Get("http://downstream/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ov := g.Overload()
	if len(ov) != 1 || ov[0].Type != slidegate.AdaptiveRule {
		t.Fatalf("Overload() = %+v, want the adaptive rule", ov)
	}
	return ov[0].Limit
}

func TestTransportBacksOffWhenTheDownstreamIsOverloaded(t *testing.T) {
	if l := adaptiveLimitAfter(t, http.StatusServiceUnavailable); l >= 100 {
		t.Errorf("after 40 answers 503: adaptive limit %d, want below the 100 it started from", l)
	}
	// A failure that is not an overload, and a success, are samples of
	// the response time: sequential requests neither queue nor use the
	// limit, so it stays.
	for _, status := range []int{http.StatusInternalServerError, http.StatusOK} {
		if l := adaptiveLimitAfter(t, status); l != 100 {
			t.Errorf("after 40 answers %d: adaptive limit %d, want the 100 it started from", status, l)
		}
	}
}

func TestServerBacksOffWhenItsHandlerSaysOverloaded(t *testing.T) {
	const resource = "GET /x"
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: resource, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	h := httpguard.Middleware(g, httpguard.WithResource(func(*http.Request) string { return resource }))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			clk.Advance(10 * time.Millisecond)
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}))
	for range 40 {
		serve(h, "GET", "/x")
	}
	if ov := g.Overload(); len(ov) != 1 || ov[0].Limit >= 100 {
		t.Errorf("after the handler answered 503 forty times: %+v, want the adaptive limit below 100", ov)
	}
}

// A 429 is an overload signal, but by default not an error (WithIsError),
// and only errors are judged as overloaded: counting it needs WithIsError.
func TestTransportBacksOffOn429WhenItCountsAsAnError(t *testing.T) {
	const resource = "GET downstream"
	g, clk := newGuard(t, slidegate.Rules{Flow: []slidegate.FlowRule{{
		Resource: resource, Type: slidegate.AdaptiveRule, Limit: 100, MinLimit: 4, MaxLimit: 1000,
	}}})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clk.Advance(10 * time.Millisecond)
		return &http.Response{StatusCode: http.StatusTooManyRequests, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	rt := httpguard.Transport(g, base,
		httpguard.WithResource(func(*http.Request) string { return resource }),
		httpguard.WithIsError(func(s int) bool { return s >= 500 || s == http.StatusTooManyRequests }))
	for range 40 {
		resp, err := rt.RoundTrip(httptest.NewRequest("GET", "http://downstream/x", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if ov := g.Overload(); len(ov) != 1 || ov[0].Limit >= 100 {
		t.Errorf("after 40 answers 429 counted as errors: %+v, want the adaptive limit below 100", ov)
	}
}

func TestTransportOverloadBlockIsABlockError(t *testing.T) {
	g, _ := newGuard(t, adaptiveRules("GET downstream"))
	e, err := g.Enter(context.Background(), "GET downstream")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Exit(nil)
	sent := false
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("sent") })
	_, err = httpguard.Transport(g, base).RoundTrip(httptest.NewRequest("GET", "http://downstream/x", nil))
	var be *slidegate.BlockError
	if !errors.As(err, &be) || be.Reason != flow.Overloaded || sent {
		t.Fatalf("request over the adaptive limit: %v (sent %v), want a BlockError for Overloaded, not sent", err, sent)
	}
}
