// Package adapter holds what the guard's HTTP middleware shares with its
// adapters to other routers (gin, echo, chi): how a request is named, how
// a blocked one is answered, and how a request runs within its entry.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/flow"
	"github.com/slidegate/slidegate/middleware/internal/pause"
)

// The names of requests whose route is not known or not served.
const (
	// NoRoute names every request that no route serves.
	NoRoute = "(no route)"
	// OtherMethod stands for every method outside the standard ten.
	OtherMethod = "_OTHER"
	// UnknownRoute stands for a route the middleware cannot learn.
	UnknownRoute = "(unknown route)"
)

// Method returns r.Method if it is one of the methods of RFC 9110 and RFC
// 5789, and OtherMethod otherwise.
func Method(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return r.Method
	}
	return OtherMethod
}

// PatternResource names r by its method and pattern, the route that serves
// it: pattern prefixed by the method unless it names one ("GET
// /users/{id}"), or NoRoute if pattern is empty. The pattern must come from
// the program's routes, never from the request.
func PatternResource(r *http.Request, pattern string) string {
	if pattern == "" {
		return NoRoute
	}
	return WithMethod(Method(r), pattern)
}

// WithMethod prefixes pattern with method unless it starts with one.
func WithMethod(method, pattern string) string {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case ' ', '\t':
			return pattern // "GET /x" or "GET host/x"
		case '/':
			return method + " " + pattern
		}
	}
	return method + " " + pattern
}

// unknownRoutes holds the names UnknownRouteResource returns, so that naming
// a request costs no allocation.
var unknownRoutes = map[string]string{}

func init() {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace, OtherMethod} {
		unknownRoutes[m] = m + " " + UnknownRoute
	}
}

// UnknownRouteResource names a request whose route is not known by its
// method and UnknownRoute: one of ten names, whatever the request's path.
func UnknownRouteResource(r *http.Request) string { return unknownRoutes[Method(r)] }

// ServerError reports whether status is a 5xx: what counts as a failure
// by default.
func ServerError(status int) bool { return status >= 500 && status <= 599 }

var (
	errPanicked = errors.New("httpguard: the handler panicked")
	// A handler aborted with http.ErrAbortHandler, as httputil.ReverseProxy
	// does when the client goes away: an error in the statistics, but not
	// one the breakers count, as for a caller that gave up.
	errAborted = fmt.Errorf("httpguard: the handler aborted: %w", context.Canceled)
)

// PanicError is the error recorded for a handler that panicked with v: an
// error the breakers count, except for http.ErrAbortHandler, recorded as
// an error that wraps context.Canceled.
func PanicError(v any) error {
	if v == http.ErrAbortHandler {
		return errAborted
	}
	return errPanicked
}

// BlockedStatus returns the status and the Retry-After header a blocked
// request is answered with: 429 for a limit the client reached, 503 for a
// breaker, an overload, or a request that ended while it waited.
// retryAfter is "" when the rule does not know when to retry. It
// allocates nothing for waits under 100 s.
func BlockedStatus(err error) (status int, retryAfter string) {
	status = http.StatusServiceUnavailable
	var be *slidegate.BlockError
	if errors.As(err, &be) {
		switch be.Reason {
		case flow.BreakerOpen, flow.Overloaded:
		default:
			status = http.StatusTooManyRequests
		}
		if be.RetryAfter > 0 {
			retryAfter = strconv.FormatInt(RetryAfterSeconds(be.RetryAfter), 10)
		}
	}
	return status, retryAfter
}

// RetryAfterSeconds returns d in whole seconds, rounded up: the value of a
// Retry-After header, which cannot say less than a second.
func RetryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// The defaults of httpguard.RetryPolicy's zero fields, for HTTP and gRPC.
const (
	defaultMaxRetries  = 2
	defaultBaseBackoff = 25 * time.Millisecond
	defaultMaxBackoff  = time.Second
)

// RetryDefaults returns a retry policy's numbers with each zero one's
// default: 2 retries, a base backoff of 25 ms, a longest of 1 s. A
// negative maxRetries (no retry) is kept, as is a positive number; a
// backoff that is not positive takes its default.
func RetryDefaults(maxRetries int, base, longest time.Duration) (int, time.Duration, time.Duration) {
	if maxRetries == 0 {
		maxRetries = defaultMaxRetries
	}
	if base <= 0 {
		base = defaultBaseBackoff
	}
	if longest <= 0 {
		longest = defaultMaxBackoff
	}
	return maxRetries, base, longest
}

// Enter enters r into g as inbound traffic to resource, with key if keyed.
func Enter(g *slidegate.Guard, r *http.Request, resource string, key string, keyed bool) (slidegate.Entry, error) {
	var buf [2]slidegate.EntryOption // on the stack: Enter keeps none of them
	eo := append(buf[:0], slidegate.WithInbound())
	if keyed {
		eo = append(eo, slidegate.WithKey(key))
	}
	return g.Enter(r.Context(), resource, eo...)
}

// Serve runs next for r within e, and exits e with what failure says once
// next returns. The reads of r's body wait on the client: they are paused,
// left out of the response time. If next panics, e exits with PanicError
// and the panic goes on.
func Serve(e slidegate.Entry, r *http.Request, next func(), failure func() error) {
	r.Body = pause.Wrap(r.Body, http.NoBody, e)
	defer func() {
		if v := recover(); v != nil {
			e.Exit(PanicError(v))
			panic(v) // on the original stack, which is not unwound yet
		}
	}()
	next()
	e.Exit(failure())
}
