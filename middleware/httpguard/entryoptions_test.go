package httpguard_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/httpguard"
)

// TestEntryOptionsSliceIsNotWrittenTo gives the middleware and the
// transport, through WithEntryOptions, one slice shared by every request,
// with room to grow, as a caller may well do for options that do not change.
// The middleware must not append to it in place: concurrent requests would
// write to the same element (the race detector reports it), and one
// request's key could end up in another's options.
func TestEntryOptionsSliceIsNotWrittenTo(t *testing.T) {
	g, _ := newGuard(t, slidegate.Rules{})
	shared := make([]slidegate.EntryOption, 1, 8)
	shared[0] = slidegate.WithCount(1)
	opts := func(*http.Request) []slidegate.EntryOption { return shared }
	h := httpguard.Middleware(g, httpguard.WithEntryOptions(opts))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	tr := httpguard.Transport(g, roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}), httpguard.WithEntryOptions(opts))

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
				if _, err := tr.RoundTrip(httptest.NewRequest("GET", "http://example.com/", nil)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := shared[:cap(shared)]; got[1] != (slidegate.EntryOption{}) {
		t.Errorf("the middleware wrote past the end of the slice WithEntryOptions returned: %v", got[:2])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
